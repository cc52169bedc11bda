// Package validation holds the field-level rules of Database objects, which
// the registry strategy runs on every write (a failure is a 422 Invalid
// naming the field): the engine enum, replicas 1 to 10, the storage pattern,
// an immutable engine and storage that never shrinks, spec.primary one of the
// Database's Pods and never removed by a scale-down, with the messages of the
// Database API ("engine type is immutable", "replicas cannot exceed 10"), and
// the upstream conventions of k8s.io/apimachinery/pkg/api/validation. Whether a version is in the
// engine's catalog, and whether a version change is safe, is judged by the
// DatabaseValidation admission plugin (pkg/catalog), not here.
package validation

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/apis/example"
	"example.com/database-apiserver/pkg/storagesize"
)

// controllerRevisionHashLength is the length of the hash a StatefulSet
// appends to its name in ControllerRevision names (rand.SafeEncodeString of
// a 32-bit FNV hash: at most 10 characters).
const controllerRevisionHashLength = 10

// MaxNameLength is the longest Database name, 52. The controller names the
// StatefulSet after the Database, and the StatefulSet labels each Pod
// controller-revision-hash=<name>-<hash of up to 10 characters>; label values
// are at most 63 characters, so a longer name leaves the StatefulSet unable
// to create Pods. The other children fit within it: Pods <name>-<ordinal>,
// the client Service <name> and the headless Service <name>-headless, all
// DNS-1035 labels of at most 63 characters.
const MaxNameLength = validation.LabelValueMaxLength - len("-") - controllerRevisionHashLength

// generatedNameSuffixLength is how many random characters metadata.generateName
// gets appended (k8s.io/apiserver/pkg/storage/names).
const generatedNameSuffixLength = 5

// MaxVersionLength is the longest spec.version, 128 characters: the longest
// container image tag (OCI distribution spec).
const MaxVersionLength = 128

// MaxNetworkPolicyPeers is the most peers spec.networkPolicy.from may list: a
// bound on the NetworkPolicy the controller writes, far above what one
// Database's clients need.
const MaxNetworkPolicyPeers = 16

// MaxNetworkPolicyTerms is the most label terms the selectors of spec.networkPolicy.from may
// hold in all, a matchLabels entry and each key and value of a matchExpressions requirement
// counting one: it keeps the Database and the NetworkPolicy the controller writes far below
// etcd's request limit (a term is at most 317 bytes), so an oversized spec is a 422, not a
// write etcd refuses.
const MaxNetworkPolicyTerms = 512

// versionFmt is the container image tag grammar (OCI distribution spec),
// which spec.version must follow because it becomes the image tag.
const versionFmt = `[A-Za-z0-9_][A-Za-z0-9_.-]*`

var (
	versionRegexp = regexp.MustCompile("^" + versionFmt + "$")
	storageRegexp = regexp.MustCompile(storagesize.Pattern)
)

// ValidateDatabaseName is the ValidateNameFunc of Databases: name must be a
// DNS-1035 label (lower case alphanumerics and '-', starting with a letter)
// of at most MaxNameLength characters. With prefix (a generateName), a
// trailing '-' is allowed and the limit is MaxNameLength less the 5
// generated characters. It returns one message per broken rule, nil if none.
func ValidateDatabaseName(name string, prefix bool) []string {
	maxLength := MaxNameLength
	reason := "the StatefulSet's Pods carry the label controller-revision-hash=<name>-<10-character hash>, and label values are limited to 63 characters"
	if prefix {
		maxLength -= generatedNameSuffixLength
		reason = fmt.Sprintf("%d random characters are appended, and names are limited to %d characters", generatedNameSuffixLength, MaxNameLength)
	}
	var msgs []string
	for _, msg := range apimachineryvalidation.NameIsDNS1035Label(name, prefix) {
		// Our limit is lower than a label's 63; say it once, below.
		if msg != validation.MaxLenError(validation.DNS1035LabelMaxLength) {
			msgs = append(msgs, msg)
		}
	}
	if len(name) > maxLength {
		msgs = append(msgs, validation.MaxLenError(maxLength)+": "+reason)
	}
	return msgs
}

// ValidateDatabase validates a Database on create: its metadata (namespaced,
// name by ValidateDatabaseName), its spec (ValidateDatabaseSpec), a release
// its engine cannot replicate with more than one replica
// (ReplicationRelease), and spec.primary against its name and spec.replicas
// (ValidatePrimary).
func ValidateDatabase(db *example.Database) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMeta(&db.ObjectMeta, true, ValidateDatabaseName, field.NewPath("metadata"))
	errs = append(errs, ValidateDatabaseSpec(&db.Spec, field.NewPath("spec"))...)
	if db.Spec.Restore != nil && db.Spec.Backup == nil && rulesOf(db.Spec.Engine).Backups {
		// Only at creation: the restore is done once; later the Database may stop backing up.
		errs = append(errs, field.Forbidden(field.NewPath("spec", "restore"), "needs spec.backup: the store to restore from is spec.backup.s3's"))
	}
	if err := ReplicationRelease(&db.Spec, nil, field.NewPath("spec", "version")); err != nil {
		errs = append(errs, err)
	}
	return append(errs, ValidatePrimary(db.Spec.Primary, db.Name, db.Spec.Replicas, field.NewPath("spec", "primary"))...)
}

// EngineRules are an engine's own rules on a Database's spec, which its engine package
// registers (RegisterEngineRules); an engine without any has none.
type EngineRules struct {
	// ReplicationRelease says why spec, of more than one replica, cannot replicate at its
	// version ("" when it can): a sentence for a Forbidden error on spec.version.
	ReplicationRelease func(spec *example.DatabaseSpec) string
	// ReplicaWarnings are the warnings of replicas (more than one) for a user who may think
	// them safer than they are.
	ReplicaWarnings func(replicas int32) []string
	// ElectsPrimary says that the engine's members elect their primary among them (a
	// replica set), so spec.failover, spec.failoverDelaySeconds and spec.durability, which
	// rule how the controller replaces a primary, do not apply: Forbidden when set.
	ElectsPrimary bool
	// Backups says that the engine archives its changes and takes backups (spec.backup);
	// spec.backup is Forbidden on an engine without.
	Backups bool
}

var (
	engineRulesMu sync.RWMutex
	engineRules   = map[example.Engine]EngineRules{}
)

// RegisterEngineRules makes rules the rules of engine.
func RegisterEngineRules(engine example.Engine, rules EngineRules) {
	engineRulesMu.Lock()
	defer engineRulesMu.Unlock()
	engineRules[engine] = rules
}

// UnregisterEngineRules removes the rules of engine; for tests that register an engine of
// their own.
func UnregisterEngineRules(engine example.Engine) {
	engineRulesMu.Lock()
	defer engineRulesMu.Unlock()
	delete(engineRules, engine)
}

func rulesOf(engine example.Engine) EngineRules {
	engineRulesMu.RLock()
	defer engineRulesMu.RUnlock()
	return engineRules[engine]
}

// ReplicationRelease is Forbidden on spec.version at fldPath for a spec of more than one
// replica whose engine says its version cannot replicate (EngineRules.ReplicationRelease),
// unless oldSpec (nil on create) was stored so: an update that changes neither the
// version nor the replication is not judged again. It holds on every write, the scale
// subresource's included.
func ReplicationRelease(spec, oldSpec *example.DatabaseSpec, fldPath *field.Path) *field.Error {
	rules := rulesOf(spec.Engine)
	if rules.ReplicationRelease == nil || ptr.Deref(spec.Replicas, 1) <= 1 {
		return nil
	}
	why := rules.ReplicationRelease(spec)
	if why == "" {
		return nil
	}
	if oldSpec != nil && oldSpec.Engine == spec.Engine && oldSpec.Version == spec.Version && ptr.Deref(oldSpec.Replicas, 1) > 1 {
		return nil
	}
	return field.Forbidden(fldPath, why)
}

// ReplicaWarnings are the warnings (the response's Warning header, which kubectl prints) of a
// spec of more than one replica whose engine warns of its number
// (EngineRules.ReplicaWarnings). Given on create, and on an update (oldSpec set) that
// changes spec.replicas; nil otherwise.
func ReplicaWarnings(spec, oldSpec *example.DatabaseSpec) []string {
	rules := rulesOf(spec.Engine)
	if rules.ReplicaWarnings == nil || spec.Replicas == nil || *spec.Replicas <= 1 {
		return nil
	}
	if oldSpec != nil && oldSpec.Replicas != nil && *oldSpec.Replicas == *spec.Replicas {
		return nil
	}
	return rules.ReplicaWarnings(*spec.Replicas)
}

// ValidatePrimary validates spec.primary at fldPath of the Database name with
// replicas Pods (after defaulting): empty, or exactly "<name>-<n>" with n a
// decimal of no leading zeros and 0 <= n < replicas, i.e. one of the Pods the
// StatefulSet runs. Otherwise Invalid, with the Pods it may name ("must be one
// of the Database's Pods: my-database-0 … my-database-2"). With replicas nil
// or below example.MinReplicas, which ValidateDatabaseSpec reports, only the
// "<name>-<n>" form is checked.
func ValidatePrimary(primary, name string, replicas *int32, fldPath *field.Path) field.ErrorList {
	if primary == "" {
		return nil
	}
	ordinal, ok := example.PodOrdinal(name, primary)
	if replicas == nil || *replicas < example.MinReplicas {
		if !ok {
			return field.ErrorList{field.Invalid(fldPath, primary, fmt.Sprintf("must be one of the Database's Pods: %s-<ordinal>", name))}
		}
		return nil
	}
	if !ok || ordinal >= *replicas {
		return field.ErrorList{field.Invalid(fldPath, primary, "must be one of the Database's Pods: "+podRange(name, *replicas))}
	}
	return nil
}

// podRange lists the Pods of the Database name with replicas (at least 1)
// Pods for messages: "my-database-0", "my-database-0, my-database-1", or
// "my-database-0 … my-database-2".
func podRange(name string, replicas int32) string {
	switch replicas {
	case 1:
		return example.PodName(name, 0)
	case 2:
		return example.PodName(name, 0) + ", " + example.PodName(name, 1)
	default:
		return example.PodName(name, 0) + " … " + example.PodName(name, replicas-1)
	}
}

// ValidateDatabaseSpec validates spec at fldPath:
//   - engine: Required when empty, NotSupported unless one of
//     example.SupportedEngines;
//   - version: Required when empty, TooLong over MaxVersionLength, Invalid
//     unless a container image tag;
//   - replicas: Required when nil (the DatabaseDefaults admission plugin sets
//     it before validation), else ValidateReplicas;
//   - storage: ValidateStorage (Required when empty, for the same reason);
//   - deletionPolicy: ValidateDeletionPolicy when set;
//   - networkPolicy: ValidateNetworkPolicy when set.
func ValidateDatabaseSpec(spec *example.DatabaseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList

	enginePath := fldPath.Child("engine")
	switch {
	case spec.Engine == "":
		errs = append(errs, field.Required(enginePath, ""))
	case !slices.Contains(example.SupportedEngines, spec.Engine):
		errs = append(errs, field.NotSupported(enginePath, string(spec.Engine), example.SupportedEngines))
	}

	versionPath := fldPath.Child("version")
	switch {
	case spec.Version == "":
		errs = append(errs, field.Required(versionPath, ""))
	case len(spec.Version) > MaxVersionLength:
		errs = append(errs, field.TooLong(versionPath, spec.Version, MaxVersionLength))
	case !versionRegexp.MatchString(spec.Version):
		errs = append(errs, field.Invalid(versionPath, spec.Version,
			validation.RegexError("must be a container image tag", versionFmt, "14.5", "8.4")))
	}

	if spec.Replicas == nil {
		errs = append(errs, field.Required(fldPath.Child("replicas"), ""))
	} else {
		errs = append(errs, ValidateReplicas(*spec.Replicas, fldPath.Child("replicas"))...)
	}

	errs = append(errs, ValidateStorage(spec.Storage, fldPath.Child("storage"))...)
	if spec.DeletionPolicy != "" {
		errs = append(errs, ValidateDeletionPolicy(spec.DeletionPolicy, fldPath.Child("deletionPolicy"))...)
	}
	if spec.NetworkPolicy != nil {
		errs = append(errs, ValidateNetworkPolicy(spec.NetworkPolicy, fldPath.Child("networkPolicy"))...)
	}
	if spec.Backup != nil {
		errs = append(errs, ValidateBackup(spec, fldPath.Child("backup"))...)
	}
	if spec.Restore != nil {
		errs = append(errs, ValidateRestore(spec, fldPath.Child("restore"))...)
	}
	return append(errs, ValidateFailover(spec, fldPath)...)
}

// ValidateRestore validates spec.restore of spec at fldPath: Forbidden on an engine that takes
// no backups; database Required, Invalid unless a Database name; pointInTime, when set,
// Invalid unless RFC 3339 (fractions of a second allowed). ValidateDatabase requires
// spec.backup with it at creation, the store it restores from.
func ValidateRestore(spec *example.DatabaseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Engine != "" && !rulesOf(spec.Engine).Backups {
		return append(errs, field.Forbidden(fldPath, fmt.Sprintf("%s Databases take no backups, so restore none", spec.Engine)))
	}
	if t := spec.Restore.PointInTime; t != "" {
		if len(t) > MaxPointInTimeLength {
			errs = append(errs, field.TooLong(fldPath.Child("pointInTime"), "", MaxPointInTimeLength))
		} else if _, err := time.Parse(time.RFC3339Nano, t); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("pointInTime"), t,
				`must be a time in RFC 3339 with its zone, e.g. "2026-12-05T04:59:30Z" or "2026-12-05T05:59:30.25+01:00"`))
		}
	}
	if spec.Restore.Database == "" {
		errs = append(errs, field.Required(fldPath.Child("database"), "the name of the Database whose backups to restore"))
	} else {
		for _, msg := range ValidateDatabaseName(spec.Restore.Database, false) {
			errs = append(errs, field.Invalid(fldPath.Child("database"), spec.Restore.Database, msg))
		}
	}
	return errs
}

// ValidateRestoreWindow validates, at creation, spec.restore.pointInTime of spec at fldPath
// (spec.restore) against what can be restored, as of now: Invalid when it is later than now
// (the archive holds no change after now, and a recovery that ends before its target fails),
// or earlier than first, the first time the backups of the Database named
// spec.restore.database restore to (just after the end of the oldest backup the store
// keeps), when it is known (nil: not checked; the restore fails then, on the Restored
// condition, when the store holds nothing that old). A pointInTime that does not parse is
// left to ValidateRestore.
func ValidateRestoreWindow(spec *example.DatabaseSpec, first *metav1.Time, now time.Time, fldPath *field.Path) field.ErrorList {
	if spec.Restore == nil || spec.Restore.PointInTime == "" || len(spec.Restore.PointInTime) > MaxPointInTimeLength {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, spec.Restore.PointInTime)
	if err != nil {
		return nil
	}
	fld := fldPath.Child("pointInTime")
	switch {
	case first != nil && (t.Before(first.Time) || t.After(now)):
		return field.ErrorList{field.Invalid(fld, spec.Restore.PointInTime, fmt.Sprintf(
			"must be within the recoverability window of Database %q: from %s (just after the end of the oldest backup its store keeps) to now (%s)",
			spec.Restore.Database, first.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)))}
	case t.After(now):
		return field.ErrorList{field.Invalid(fld, spec.Restore.PointInTime, fmt.Sprintf(
			"must not be later than now (%s): no change after it is archived yet", now.UTC().Format(time.RFC3339)))}
	}
	return nil
}

// ValidateBackup validates spec.backup of spec at fldPath: Forbidden on an engine that takes
// no backups (EngineRules.Backups), naming the engines that do, and nothing else checked;
// schedule TooLong over MaxScheduleLength, Invalid unless five cron fields as a CronJob's
// schedule takes them (robfig/cron's standard parser, which kube-apiserver uses) or one of its
// descriptors of a time of day ("@daily"; not "@every", an interval that could ask for a full
// backup every second), without a time zone; retentionFullBackups Invalid outside
// MinRetentionFullBackups to MaxRetentionFullBackups; s3.endpoint Required, Invalid unless
// "https://<DNS name>[:<port>]" (pgBackRest verifies the store's certificate against a DNS
// name, never an IP address, in any of its forms, and takes no path); s3.bucket Required,
// Invalid unless an S3 bucket name (no IP address, no prefix or suffix S3 reserves);
// s3.prefix Invalid unless "/" or "/"-separated segments, none "." or ".."; s3.region
// Invalid unless a region name; s3.secretName Required, Invalid unless a Secret name; each
// TooLong past its bound (the refused value is not echoed).
func ValidateBackup(spec *example.DatabaseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Engine != "" && !rulesOf(spec.Engine).Backups {
		why := fmt.Sprintf("%s Databases take no backups yet", spec.Engine)
		if engines := enginesWithBackups(); len(engines) > 0 {
			why += "; engines that do: " + strings.Join(engines, ", ")
		} else {
			why += "; no engine does yet"
		}
		return append(errs, field.Forbidden(fldPath, why))
	}
	b := spec.Backup
	switch schedulePath := fldPath.Child("schedule"); {
	case b.Schedule == "":
	case len(b.Schedule) > MaxScheduleLength:
		errs = append(errs, field.TooLong(schedulePath, "", MaxScheduleLength))
	case strings.Contains(b.Schedule, "TZ"):
		errs = append(errs, field.Invalid(schedulePath, b.Schedule, "must not name a time zone: the schedule is in UTC"))
	case strings.HasPrefix(strings.TrimSpace(b.Schedule), "@every"):
		errs = append(errs, field.Invalid(schedulePath, b.Schedule,
			`must be five cron fields or one of @yearly, @monthly, @weekly, @daily, @hourly, not an "@every" interval, which could ask for a full backup every second`))
	default:
		if _, err := cron.ParseStandard(b.Schedule); err != nil {
			errs = append(errs, field.Invalid(schedulePath, b.Schedule,
				"must be five cron fields, minute hour day-of-month month day-of-week, e.g. \"0 3 * * *\": "+err.Error()))
		}
	}
	if r := b.RetentionFullBackups; r != nil && (*r < example.MinRetentionFullBackups || *r > example.MaxRetentionFullBackups) {
		errs = append(errs, field.Invalid(fldPath.Child("retentionFullBackups"), *r, fmt.Sprintf("must be from %d to %d",
			example.MinRetentionFullBackups, example.MaxRetentionFullBackups)))
	}
	s3Path := fldPath.Child("s3")
	if msg := endpointError(b.S3.Endpoint); b.S3.Endpoint == "" {
		errs = append(errs, field.Required(s3Path.Child("endpoint"), `an HTTPS URL, e.g. "https://s3.example.com"`))
	} else if len(b.S3.Endpoint) > MaxEndpointLength {
		errs = append(errs, field.TooLong(s3Path.Child("endpoint"), "", MaxEndpointLength))
	} else if msg != "" {
		errs = append(errs, field.Invalid(s3Path.Child("endpoint"), b.S3.Endpoint, msg))
	}
	switch bucket := b.S3.Bucket; {
	case bucket == "":
		errs = append(errs, field.Required(s3Path.Child("bucket"), ""))
	case len(bucket) > 63:
		errs = append(errs, field.TooLong(s3Path.Child("bucket"), "", 63))
	case len(bucket) < 3 || len(bucket) > 63 || !bucketRegexp.MatchString(bucket) || strings.Contains(bucket, ".."):
		errs = append(errs, field.Invalid(s3Path.Child("bucket"), bucket,
			"must be 3 to 63 lower-case letters, digits, dots and hyphens, beginning and ending with a letter or digit, no two dots in a row"))
	case net.ParseIP(bucket) != nil || reservedBucket(bucket):
		errs = append(errs, field.Invalid(s3Path.Child("bucket"), bucket,
			`must not be an IP address, begin with "xn--" or "sthree-", nor end with "-s3alias", "--ol-s3" or "--x-s3" (names S3 reserves)`))
	}
	if p := b.S3.Prefix; len(p) > MaxBackupPrefixLength {
		errs = append(errs, field.TooLong(s3Path.Child("prefix"), "", MaxBackupPrefixLength))
	} else if p != "" && (!prefixRegexp.MatchString(p) || hasDotSegment(p)) {
		errs = append(errs, field.Invalid(s3Path.Child("prefix"), p,
			fmt.Sprintf(`must be "/" or "/"-separated segments of letters, digits, ".", "_" and "-" ("/backups/production"), none of them "." or "..", at most %d characters`, MaxBackupPrefixLength)))
	}
	if r := b.S3.Region; len(r) > 64 {
		errs = append(errs, field.TooLong(s3Path.Child("region"), "", 64))
	} else if r != "" && !regionRegexp.MatchString(r) {
		errs = append(errs, field.Invalid(s3Path.Child("region"), r, `must be a region name of lower-case letters, digits and hyphens, e.g. "us-east-1"`))
	}
	if b.S3.SecretName == "" {
		errs = append(errs, field.Required(s3Path.Child("secretName"), "a Secret of the Database's namespace with the keys accessKeyId and secretAccessKey"))
	} else if len(b.S3.SecretName) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(s3Path.Child("secretName"), "", validation.DNS1123SubdomainMaxLength))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(b.S3.SecretName) {
			errs = append(errs, field.Invalid(s3Path.Child("secretName"), b.S3.SecretName, msg))
		}
	}
	return errs
}

// reservedBucket reports whether bucket has a prefix or suffix S3 reserves
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
func reservedBucket(bucket string) bool {
	for _, prefix := range []string{"xn--", "sthree-"} {
		if strings.HasPrefix(bucket, prefix) {
			return true
		}
	}
	for _, suffix := range []string{"-s3alias", "--ol-s3", "--x-s3"} {
		if strings.HasSuffix(bucket, suffix) {
			return true
		}
	}
	return false
}

// restoreString is spec.restore as a user writes it: "database=<name>[, pointInTime=<time>]",
// or "none".
func restoreString(r *example.DatabaseRestore) string {
	switch {
	case r == nil:
		return "none"
	case r.PointInTime == "":
		return "database=" + r.Database
	default:
		return "database=" + r.Database + ", pointInTime=" + r.PointInTime
	}
}

// enginesWithBackups lists the engines whose rules take backups (EngineRules.Backups), in
// the order of example.SupportedEngines.
func enginesWithBackups() []string {
	engineRulesMu.RLock()
	defer engineRulesMu.RUnlock()
	var engines []string
	for _, e := range example.SupportedEngines {
		if engineRules[e].Backups {
			engines = append(engines, string(e))
		}
	}
	return engines
}

// hasDotSegment says whether the path p has a "." or ".." segment. An object store keeps
// such a key as written, while a filesystem, an HTTP client or proxy that normalizes the
// request's path (RFC 3986 dot-segment removal) resolves it, and some stores (MinIO) refuse
// it: a prefix that does not mean one place.
func hasDotSegment(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// The longest values of spec.backup and spec.restore: far above any real one, so a refused
// value is not echoed back at length.
const (
	MaxBackupPrefixLength = 256
	MaxScheduleLength     = 128
	MaxEndpointLength     = 2048
	MaxPointInTimeLength  = 64
)

var (
	// bucketRegexp is the S3 bucket naming rule
	// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html), less
	// the length and "..", checked apart.
	bucketRegexp = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`)
	prefixRegexp = regexp.MustCompile(`^/([A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*)?$`)
	regionRegexp = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
)

// endpointError says what is wrong with endpoint as spec.backup.s3.endpoint, "" when
// nothing is: it must be "https://<host>[:<port>]", the host a DNS name (not an IP address)
// and the port from 1 to 65535, with no user, path, query or fragment.
func endpointError(endpoint string) string {
	const want = `must be "https://<DNS name>[:<port>]", e.g. "https://s3.example.com"`
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return want
	}
	host := u.Hostname()
	if net.ParseIP(host) != nil || endsInNumber(host) {
		return want + ": an IP address cannot be verified against the store's certificate"
	}
	if msgs := validation.IsDNS1123Subdomain(strings.ToLower(host)); len(msgs) > 0 {
		return want + ": " + strings.Join(msgs, "; ")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return want + ": the port must be from 1 to 65535"
		}
	}
	return ""
}

// endsInNumber says whether host's last label is a number, decimal or "0x" hexadecimal, as
// the WHATWG URL standard's "ends in a number" check has it: such a host is an IPv4 address
// in one of the forms resolvers take (inet_aton: "10.1", "010.0.0.1", "0x0a000001") that
// net.ParseIP does not, and no top-level domain is numeric.
func endsInNumber(host string) bool {
	last := host[strings.LastIndex(host, ".")+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	hex, ok := strings.CutPrefix(strings.ToLower(last), "0x")
	return ok && strings.Trim(hex, "0123456789abcdef") == ""
}

// ValidateFailover validates spec.failover, spec.failoverDelaySeconds and spec.durability
// of spec at fldPath (spec): failover NotSupported unless empty or one of
// SupportedFailoverPolicies; failoverDelaySeconds Invalid outside MinFailoverDelaySeconds to
// MaxFailoverDelaySeconds; durability NotSupported unless empty or one of
// SupportedDurabilities, and Invalid when Synchronous with fewer than 2 replicas (a commit
// would wait for a replica that does not exist). On an engine whose members elect their
// primary (EngineRules.ElectsPrimary), each is Forbidden when set.
func ValidateFailover(spec *example.DatabaseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	failoverPath, delayPath, durabilityPath := fldPath.Child("failover"), fldPath.Child("failoverDelaySeconds"), fldPath.Child("durability")
	if rulesOf(spec.Engine).ElectsPrimary {
		why := fmt.Sprintf("%s elects its primary among its members by itself; the controller does not replace it", spec.Engine)
		if spec.Failover != "" {
			errs = append(errs, field.Forbidden(failoverPath, why))
		}
		if spec.FailoverDelaySeconds != nil {
			errs = append(errs, field.Forbidden(delayPath, why))
		}
		if spec.Durability != "" {
			errs = append(errs, field.Forbidden(durabilityPath, fmt.Sprintf("%s: a write's durability is the write concern its client asks for", why)))
		}
		return errs
	}
	if spec.Failover != "" && !slices.Contains(example.SupportedFailoverPolicies, spec.Failover) {
		errs = append(errs, field.NotSupported(failoverPath, string(spec.Failover), example.SupportedFailoverPolicies))
	}
	if d := spec.FailoverDelaySeconds; d != nil && (*d < example.MinFailoverDelaySeconds || *d > example.MaxFailoverDelaySeconds) {
		errs = append(errs, field.Invalid(delayPath, *d, fmt.Sprintf("must be a number of seconds from %d to %d",
			example.MinFailoverDelaySeconds, example.MaxFailoverDelaySeconds)))
	}
	switch {
	case spec.Durability == "":
	case !slices.Contains(example.SupportedDurabilities, spec.Durability):
		errs = append(errs, field.NotSupported(durabilityPath, string(spec.Durability), example.SupportedDurabilities))
	case spec.Durability == example.DurabilitySynchronous && spec.Replicas != nil && *spec.Replicas < 2:
		errs = append(errs, field.Invalid(durabilityPath, spec.Durability,
			"needs spec.replicas of 2 or more: a commit is acknowledged once a replica has it too"))
	}
	return errs
}

// ValidateNetworkPolicy validates spec.networkPolicy at fldPath: from is TooMany over
// MaxNetworkPolicyPeers, and Invalid when its selectors hold more than MaxNetworkPolicyTerms
// terms; each peer is Required unless it sets podSelector or
// namespaceSelector (as networking.k8s.io/v1 requires of a NetworkPolicyPeer), and each
// selector is validated as kube-apiserver validates a label selector (label keys and values,
// operators In, NotIn, Exists and DoesNotExist and their values).
func ValidateNetworkPolicy(policy *example.DatabaseNetworkPolicy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	fromPath := fldPath.Child("from")
	if len(policy.From) > MaxNetworkPolicyPeers {
		errs = append(errs, field.TooMany(fromPath, len(policy.From), MaxNetworkPolicyPeers))
	}
	if terms := networkPolicyTerms(policy); terms > MaxNetworkPolicyTerms {
		errs = append(errs, field.Invalid(fromPath, fmt.Sprintf("%d label terms", terms),
			fmt.Sprintf("the selectors may hold at most %d label terms in all (a matchLabels entry, a matchExpressions key or value: one each)", MaxNetworkPolicyTerms)))
	}
	for i, peer := range policy.From {
		peerPath := fromPath.Index(i)
		if peer.PodSelector == nil && peer.NamespaceSelector == nil {
			errs = append(errs, field.Required(peerPath, "must set podSelector, namespaceSelector or both"))
			continue
		}
		opts := metav1validation.LabelSelectorValidationOptions{}
		if peer.PodSelector != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, opts, peerPath.Child("podSelector"))...)
		}
		if peer.NamespaceSelector != nil {
			errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, opts, peerPath.Child("namespaceSelector"))...)
		}
	}
	return errs
}

// networkPolicyTerms counts the label terms of policy's selectors as MaxNetworkPolicyTerms does.
func networkPolicyTerms(policy *example.DatabaseNetworkPolicy) int {
	n := 0
	for _, peer := range policy.From {
		for _, sel := range []*metav1.LabelSelector{peer.PodSelector, peer.NamespaceSelector} {
			if sel == nil {
				continue
			}
			n += len(sel.MatchLabels)
			for _, req := range sel.MatchExpressions {
				n += 1 + len(req.Values)
			}
		}
	}
	return n
}

// ValidateDeletionPolicy validates a deletion policy at fldPath: NotSupported
// unless one of example.SupportedDeletionPolicies. An empty spec.deletionPolicy
// is not validated with it: it means Delete.
func ValidateDeletionPolicy(policy example.DeletionPolicy, fldPath *field.Path) field.ErrorList {
	if !slices.Contains(example.SupportedDeletionPolicies, policy) {
		return field.ErrorList{field.NotSupported(fldPath, string(policy), example.SupportedDeletionPolicies)}
	}
	return nil
}

// ValidateReplicas validates a replica count at fldPath: Invalid below
// example.MinReplicas or above example.MaxReplicas ("replicas cannot exceed
// 10").
func ValidateReplicas(replicas int32, fldPath *field.Path) field.ErrorList {
	switch {
	case replicas < example.MinReplicas:
		return field.ErrorList{field.Invalid(fldPath, replicas,
			fmt.Sprintf("must be at least %d", example.MinReplicas)).WithOrigin("minimum")}
	case replicas > example.MaxReplicas:
		return field.ErrorList{field.Invalid(fldPath, replicas,
			fmt.Sprintf("replicas cannot exceed %d", example.MaxReplicas)).WithOrigin("maximum")}
	}
	return nil
}

// ValidateStorage validates a volume size at fldPath: Required when empty;
// Invalid unless it matches storagesize.Pattern, is at least 1Gi and at
// most storagesize.MaxGi.
func ValidateStorage(storage string, fldPath *field.Path) field.ErrorList {
	if storage == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if !storageRegexp.MatchString(storage) {
		return field.ErrorList{field.Invalid(fldPath, storage,
			"must be a whole number of gibibytes, such as 10Gi or 100Gi (regex used for validation is '"+storagesize.Pattern+"')")}
	}
	gi, err := storagesize.Parse(storage)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(fldPath, storage, fmt.Sprintf("must be at most %dGi", storagesize.MaxGi))}
	case gi == 0:
		return field.ErrorList{field.Invalid(fldPath, storage, "must be at least 1Gi")}
	}
	return nil
}

// ValidateDatabaseUpdate validates an update of the main resource and of the
// scale subresource (which writes spec.replicas through the same strategy):
// the metadata update rules, every create rule on newDB, and four
// transitions: spec.engine and spec.restore are immutable ("engine type is immutable"),
// spec.storage may not shrink, because a PersistentVolumeClaim cannot, and
// spec.replicas may not drop to or below the ordinal of the Pod spec.primary
// names, which the scale-down would remove: that is Invalid on spec.primary
// ("while spec.primary names this Pod: name one of …"), in place of ValidatePrimary's error.
func ValidateDatabaseUpdate(newDB, oldDB *example.Database) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMetaUpdate(&newDB.ObjectMeta, &oldDB.ObjectMeta, field.NewPath("metadata"))
	errs = append(errs, apimachineryvalidation.ValidateObjectMeta(&newDB.ObjectMeta, true, ValidateDatabaseName, field.NewPath("metadata"))...)
	errs = append(errs, ValidateDatabaseSpec(&newDB.Spec, field.NewPath("spec"))...)

	specPath := field.NewPath("spec")
	if err := ReplicationRelease(&newDB.Spec, &oldDB.Spec, specPath.Child("version")); err != nil {
		errs = append(errs, err)
	}
	if err := primaryRemovedByScaleDown(newDB, oldDB, specPath.Child("primary")); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, ValidatePrimary(newDB.Spec.Primary, newDB.Name, newDB.Spec.Replicas, specPath.Child("primary"))...)
	}
	if newDB.Spec.Engine != oldDB.Spec.Engine {
		errs = append(errs, field.Invalid(specPath.Child("engine"), string(newDB.Spec.Engine), "engine type is immutable"))
	}
	if !apiequality.Semantic.DeepEqual(newDB.Spec.Restore, oldDB.Spec.Restore) {
		errs = append(errs, field.Invalid(specPath.Child("restore"), restoreString(newDB.Spec.Restore),
			"is immutable: it says where the data came from when the Database was created ("+restoreString(oldDB.Spec.Restore)+")"))
	}
	newGi, newErr := storagesize.Parse(newDB.Spec.Storage)
	oldGi, oldErr := storagesize.Parse(oldDB.Spec.Storage)
	if newErr == nil && oldErr == nil && newGi < oldGi {
		errs = append(errs, field.Invalid(specPath.Child("storage"), newDB.Spec.Storage,
			fmt.Sprintf("may not shrink from %s to %s: a PersistentVolumeClaim cannot be made smaller", oldDB.Spec.Storage, newDB.Spec.Storage)))
	}
	return errs
}

// primaryRemovedByScaleDown returns the Invalid error on spec.primary at
// fldPath when the update lowers spec.replicas (to at least
// example.MinReplicas) while spec.primary stays on a Pod whose ordinal is at
// or above the new count, so the scale-down would remove the primary; nil
// otherwise.
func primaryRemovedByScaleDown(newDB, oldDB *example.Database, fldPath *field.Path) *field.Error {
	primary := newDB.Spec.Primary
	if primary == "" || primary != oldDB.Spec.Primary || newDB.Spec.Replicas == nil || oldDB.Spec.Replicas == nil {
		return nil
	}
	newReplicas, oldReplicas := *newDB.Spec.Replicas, *oldDB.Spec.Replicas
	if newReplicas >= oldReplicas || newReplicas < example.MinReplicas {
		return nil
	}
	ordinal, ok := example.PodOrdinal(newDB.Name, primary)
	if !ok || ordinal < newReplicas {
		return nil
	}
	return field.Invalid(fldPath, primary, fmt.Sprintf(
		"spec.replicas may not drop from %d to %d while spec.primary names this Pod: name one of %s",
		oldReplicas, newReplicas, podRange(newDB.Name, newReplicas)))
}

// ValidateDatabaseStatus validates status at fldPath: phase empty or one of
// example.SupportedPhases (NotSupported), readyReplicas and observedGeneration
// not negative, conditions valid metav1.Conditions with unique types,
// selector, when set, a label selector metav1.ParseToLabelSelector accepts
// (what the scale subresource reports in status.selector), primary, when
// set, a Pod name (a DNS-1123 subdomain), switchoverProgress.step, when
// switchoverProgress is set, one of example.SupportedSwitchoverSteps
// (NotSupported), and members by ValidateMembers.
func ValidateDatabaseStatus(status *example.DatabaseStatus, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if status.Phase != "" && !slices.Contains(example.SupportedPhases, status.Phase) {
		errs = append(errs, field.NotSupported(fldPath.Child("phase"), string(status.Phase), example.SupportedPhases))
	}
	errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(int64(status.ReadyReplicas), fldPath.Child("readyReplicas"))...)
	errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(status.ObservedGeneration, fldPath.Child("observedGeneration"))...)
	errs = append(errs, metav1validation.ValidateConditions(status.Conditions, fldPath.Child("conditions"))...)
	if status.Selector != "" {
		// The scale subresource hands this selector out as a metav1.LabelSelector,
		// so it must be one that converts: equality and set-based requirements.
		if _, err := metav1.ParseToLabelSelector(status.Selector); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("selector"), status.Selector, err.Error()))
		}
	}
	if status.Primary != "" {
		for _, msg := range validation.IsDNS1123Subdomain(status.Primary) {
			errs = append(errs, field.Invalid(fldPath.Child("primary"), status.Primary, msg))
		}
	}
	if sp := status.SwitchoverProgress; sp != nil && !slices.Contains(example.SupportedSwitchoverSteps, sp.Step) {
		errs = append(errs, field.NotSupported(fldPath.Child("switchoverProgress", "step"), string(sp.Step), example.SupportedSwitchoverSteps))
	}
	return append(errs, ValidateMembers(status.Members, fldPath.Child("members"))...)
}

// ValidateMembers validates status.members at fldPath, a list keyed by name:
// each name Required and a Pod name (a DNS-1123 subdomain), no name twice
// (Duplicate), role empty or one of example.SupportedMemberRoles
// (NotSupported), and lagBytes, when set, not negative.
func ValidateMembers(members []example.DatabaseMember, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := make(map[string]bool, len(members))
	for i, m := range members {
		path := fldPath.Index(i)
		switch {
		case m.Name == "":
			errs = append(errs, field.Required(path.Child("name"), ""))
		case seen[m.Name]:
			errs = append(errs, field.Duplicate(path.Child("name"), m.Name))
		default:
			for _, msg := range validation.IsDNS1123Subdomain(m.Name) {
				errs = append(errs, field.Invalid(path.Child("name"), m.Name, msg))
			}
		}
		seen[m.Name] = true
		if m.Role != "" && !slices.Contains(example.SupportedMemberRoles, m.Role) {
			errs = append(errs, field.NotSupported(path.Child("role"), string(m.Role), example.SupportedMemberRoles))
		}
		if m.LagBytes != nil {
			errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(*m.LagBytes, path.Child("lagBytes"))...)
		}
		if m.LagSeconds != nil {
			errs = append(errs, apimachineryvalidation.ValidateNonnegativeField(*m.LagSeconds, path.Child("lagSeconds"))...)
		}
	}
	return errs
}

// ValidateDatabaseStatusUpdate validates an update through the status
// subresource: the metadata update rules, ValidateDatabaseStatus, and
// status.primary, when set, status.switchoverProgress's from and to, and each
// of status.replicaSetMembers, one of the Pods the Database may have
// ("<name>-<n>", n below example.MaxReplicas: Invalid otherwise; from and to
// Required, to not from, no member twice: Duplicate).
func ValidateDatabaseStatusUpdate(newDB, oldDB *example.Database) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMetaUpdate(&newDB.ObjectMeta, &oldDB.ObjectMeta, field.NewPath("metadata"))
	errs = append(errs, ValidateDatabaseStatus(&newDB.Status, field.NewPath("status"))...)
	if p := newDB.Status.Primary; p != "" {
		errs = append(errs, validatePodOf(newDB.Name, p, field.NewPath("status", "primary"))...)
	}
	if sp := newDB.Status.SwitchoverProgress; sp != nil {
		fldPath := field.NewPath("status", "switchoverProgress")
		errs = append(errs, validatePodOf(newDB.Name, sp.From, fldPath.Child("from"))...)
		switch {
		case sp.To == sp.From && sp.To != "":
			errs = append(errs, field.Invalid(fldPath.Child("to"), sp.To, "must not be from: a switchover moves the primary to another Pod"))
		default:
			errs = append(errs, validatePodOf(newDB.Name, sp.To, fldPath.Child("to"))...)
		}
	}
	seen := map[string]bool{}
	for i, pod := range newDB.Status.ReplicaSetMembers {
		fldPath := field.NewPath("status", "replicaSetMembers").Index(i)
		if seen[pod] {
			errs = append(errs, field.Duplicate(fldPath, pod))
			continue
		}
		seen[pod] = true
		errs = append(errs, validatePodOf(newDB.Name, pod, fldPath)...)
	}
	return errs
}

// validatePodOf validates pod at fldPath: Required, and one of the Pods the
// Database name may have (Invalid).
func validatePodOf(name, pod string, fldPath *field.Path) field.ErrorList {
	if pod == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if ordinal, ok := example.PodOrdinal(name, pod); !ok || ordinal >= example.MaxReplicas {
		return field.ErrorList{field.Invalid(fldPath, pod, "must be one of the Pods the Database may have: "+podRange(name, example.MaxReplicas))}
	}
	return nil
}
