package validation_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
	"example.com/database-apiserver/pkg/apis/example/validation"

	// The engines register their rules.
	_ "example.com/database-apiserver/pkg/engine/engines"
)

// exampleDatabase is artifacts/examples/database.yaml as an internal object, as it is stored.
func exampleDatabase() *example.Database {
	return &example.Database{
		ObjectMeta: metav1.ObjectMeta{Name: "my-database", Namespace: "production", ResourceVersion: "1"},
		Spec: example.DatabaseSpec{
			Engine:   example.EnginePostgreSQL,
			Version:  "14.5",
			Replicas: ptr.To[int32](3),
			Storage:  "100Gi",
		},
	}
}

// want is one expected field error: its type, its path, and a part of its detail.
type want struct {
	typ    field.ErrorType
	field  string
	detail string
}

func requireErrors(t *testing.T, errs field.ErrorList, wants ...want) {
	t.Helper()
	require.Len(t, errs, len(wants), "errors: %v", errs)
	for i, w := range wants {
		require.Equal(t, w.typ, errs[i].Type, "error %d: %v", i, errs[i])
		require.Equal(t, w.field, errs[i].Field, "error %d: %v", i, errs[i])
		require.Contains(t, errs[i].Detail, w.detail, "error %d: %v", i, errs[i])
	}
}

func TestMaxNameLengthLeavesRoomForTheControllerRevisionHashLabel(t *testing.T) {
	// <name>-<10-character hash> must fit a 63-character label value.
	require.Equal(t, 52, validation.MaxNameLength)
}

func TestValidateDatabaseAcceptsTheExampleAndEveryEngine(t *testing.T) {
	require.Empty(t, validation.ValidateDatabase(exampleDatabase()))

	for _, spec := range []example.DatabaseSpec{
		{Engine: example.EngineMySQL, Version: "8.4.2", Replicas: ptr.To[int32](1), Storage: "1Gi"},
		{Engine: example.EngineMongoDB, Version: "7.0", Replicas: ptr.To[int32](10), Storage: "2048Gi"},
		{Engine: example.EnginePostgreSQL, Version: "18", Replicas: ptr.To[int32](2), Storage: "8589934591Gi"},
	} {
		db := exampleDatabase()
		db.Spec = spec
		require.Empty(t, validation.ValidateDatabase(db), "%+v", spec)
	}
}

func TestValidateDatabaseSpecReportsEachBrokenRuleOnItsField(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*example.DatabaseSpec)
		want   want
	}{
		{"missing engine", func(s *example.DatabaseSpec) { s.Engine = "" }, want{field.ErrorTypeRequired, "spec.engine", ""}},
		{"unknown engine", func(s *example.DatabaseSpec) { s.Engine = "oracle" }, want{field.ErrorTypeNotSupported, "spec.engine", `supported values: "mysql", "postgresql", "mongodb"`}},
		{"engine in the wrong case", func(s *example.DatabaseSpec) { s.Engine = "PostgreSQL" }, want{field.ErrorTypeNotSupported, "spec.engine", ""}},
		{"missing version", func(s *example.DatabaseSpec) { s.Version = "" }, want{field.ErrorTypeRequired, "spec.version", ""}},
		{"version with a space", func(s *example.DatabaseSpec) { s.Version = "14 5" }, want{field.ErrorTypeInvalid, "spec.version", "must be a container image tag"}},
		{"version with a slash", func(s *example.DatabaseSpec) { s.Version = "14/5" }, want{field.ErrorTypeInvalid, "spec.version", "must be a container image tag"}},
		{"version starting with a dot", func(s *example.DatabaseSpec) { s.Version = ".14" }, want{field.ErrorTypeInvalid, "spec.version", "must be a container image tag"}},
		{"version longer than a tag", func(s *example.DatabaseSpec) { s.Version = strings.Repeat("1", 129) }, want{field.ErrorTypeTooLong, "spec.version", "128"}},
		{"missing replicas", func(s *example.DatabaseSpec) { s.Replicas = nil }, want{field.ErrorTypeRequired, "spec.replicas", ""}},
		{"zero replicas", func(s *example.DatabaseSpec) { s.Replicas = ptr.To[int32](0) }, want{field.ErrorTypeInvalid, "spec.replicas", "must be at least 1"}},
		{"negative replicas", func(s *example.DatabaseSpec) { s.Replicas = ptr.To[int32](-1) }, want{field.ErrorTypeInvalid, "spec.replicas", "must be at least 1"}},
		{"eleven replicas", func(s *example.DatabaseSpec) { s.Replicas = ptr.To[int32](11) }, want{field.ErrorTypeInvalid, "spec.replicas", "replicas cannot exceed 10"}},
		{"missing storage", func(s *example.DatabaseSpec) { s.Storage = "" }, want{field.ErrorTypeRequired, "spec.storage", ""}},
		{"storage in GB", func(s *example.DatabaseSpec) { s.Storage = "100GB" }, want{field.ErrorTypeInvalid, "spec.storage", "regex used for validation is '^[0-9]+Gi$'"}},
		{"storage in Mi", func(s *example.DatabaseSpec) { s.Storage = "512Mi" }, want{field.ErrorTypeInvalid, "spec.storage", "must be a whole number of gibibytes"}},
		{"fractional storage", func(s *example.DatabaseSpec) { s.Storage = "1.5Gi" }, want{field.ErrorTypeInvalid, "spec.storage", "^[0-9]+Gi$"}},
		{"zero storage", func(s *example.DatabaseSpec) { s.Storage = "0Gi" }, want{field.ErrorTypeInvalid, "spec.storage", "must be at least 1Gi"}},
		{"storage overflowing bytes", func(s *example.DatabaseSpec) { s.Storage = "8589934592Gi" }, want{field.ErrorTypeInvalid, "spec.storage", "must be at most 8589934591Gi"}},
		{"unknown deletion policy", func(s *example.DatabaseSpec) { s.DeletionPolicy = "Keep" }, want{field.ErrorTypeNotSupported, "spec.deletionPolicy", `supported values: "Delete", "Retain", "DoNotTerminate"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := exampleDatabase()
			tt.mutate(&db.Spec)
			requireErrors(t, validation.ValidateDatabaseSpec(&db.Spec, field.NewPath("spec")), tt.want)
		})
	}
}

func TestValidateDatabaseSpecAcceptsEveryDeletionPolicyAndNone(t *testing.T) {
	for _, policy := range append([]example.DeletionPolicy{""}, example.SupportedDeletionPolicies...) {
		db := exampleDatabase()
		db.Spec.DeletionPolicy = policy
		require.Empty(t, validation.ValidateDatabaseSpec(&db.Spec, field.NewPath("spec")), "policy %q", policy)
	}
}

func TestValidateDatabaseSpecMessagesReadAsKubectlPrintsThem(t *testing.T) {
	spec := exampleDatabase().Spec
	spec.Engine = "oracle"
	spec.Replicas = ptr.To[int32](11)
	errs := validation.ValidateDatabaseSpec(&spec, field.NewPath("spec"))
	require.Len(t, errs, 2)
	require.Equal(t, `spec.engine: Unsupported value: "oracle": supported values: "mysql", "postgresql", "mongodb"`, errs[0].Error())
	require.Equal(t, `spec.replicas: Invalid value: 11: replicas cannot exceed 10`, errs[1].Error())
}

func TestValidateDatabaseSpecReportsEveryMissingFieldAtOnce(t *testing.T) {
	requireErrors(t, validation.ValidateDatabaseSpec(&example.DatabaseSpec{}, field.NewPath("spec")),
		want{field.ErrorTypeRequired, "spec.engine", ""},
		want{field.ErrorTypeRequired, "spec.version", ""},
		want{field.ErrorTypeRequired, "spec.replicas", ""},
		want{field.ErrorTypeRequired, "spec.storage", ""},
	)
}

func TestValidateReplicasAndStorageUseTheGivenPath(t *testing.T) {
	requireErrors(t, validation.ValidateReplicas(11, field.NewPath("replicas")), want{field.ErrorTypeInvalid, "replicas", "cannot exceed 10"})
	requireErrors(t, validation.ValidateStorage("10GB", field.NewPath("storage")), want{field.ErrorTypeInvalid, "storage", "^[0-9]+Gi$"})
	require.Empty(t, validation.ValidateReplicas(example.MinReplicas, field.NewPath("replicas")))
	require.Empty(t, validation.ValidateReplicas(example.MaxReplicas, field.NewPath("replicas")))
	require.Empty(t, validation.ValidateStorage("10Gi", field.NewPath("storage")))
}

func TestValidateDatabaseNameAllowsDNS1035LabelsUpToMaxNameLength(t *testing.T) {
	tests := []struct {
		name   string
		prefix bool
		says   []string // one part per expected message; none means valid
	}{
		{name: "my-database"},
		{name: "a"},
		{name: strings.Repeat("a", 52)},
		{name: strings.Repeat("a", 53), says: []string{"must be no more than 52 characters: the StatefulSet's Pods carry the label controller-revision-hash"}},
		{name: strings.Repeat("a", 64), says: []string{"must be no more than 52 characters"}},
		{name: "My-Database", says: []string{"a DNS-1035 label must consist of lower case alphanumeric characters"}},
		{name: "1database", says: []string{"start with an alphabetic character"}},
		{name: "my.database", says: []string{"a DNS-1035 label"}},
		{name: "database-", says: []string{"end with an alphanumeric character"}},
		{name: "database-", prefix: true},
		{name: strings.Repeat("a", 47), prefix: true},
		{name: strings.Repeat("a", 48), prefix: true, says: []string{"must be no more than 47 characters: 5 random characters are appended"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := validation.ValidateDatabaseName(tt.name, tt.prefix)
			require.Len(t, msgs, len(tt.says), "%v", msgs)
			for i, s := range tt.says {
				require.Contains(t, msgs[i], s)
			}
		})
	}
}

func TestValidateDatabaseChecksObjectMeta(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*metav1.ObjectMeta)
		want   want
	}{
		{"name of 53 characters", func(m *metav1.ObjectMeta) { m.Name = strings.Repeat("a", 53) }, want{field.ErrorTypeInvalid, "metadata.name", "must be no more than 52 characters"}},
		{"uppercase name", func(m *metav1.ObjectMeta) { m.Name = "MyDatabase" }, want{field.ErrorTypeInvalid, "metadata.name", "DNS-1035"}},
		{"missing name", func(m *metav1.ObjectMeta) { m.Name = "" }, want{field.ErrorTypeRequired, "metadata.name", "name or generateName is required"}},
		{"missing namespace", func(m *metav1.ObjectMeta) { m.Namespace = "" }, want{field.ErrorTypeRequired, "metadata.namespace", ""}},
		{"generateName too long", func(m *metav1.ObjectMeta) { m.GenerateName = strings.Repeat("a", 48) }, want{field.ErrorTypeInvalid, "metadata.generateName", "must be no more than 47 characters"}},
		{"bad label", func(m *metav1.ObjectMeta) { m.Labels = map[string]string{"a": "b c"} }, want{field.ErrorTypeInvalid, "metadata.labels", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := exampleDatabase()
			tt.mutate(&db.ObjectMeta)
			requireErrors(t, validation.ValidateDatabase(db), tt.want)
		})
	}
}

func TestValidateDatabaseUpdateEnforcesTransitions(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*example.Database)
		wants  []want
	}{
		{"version change is left to admission", func(db *example.Database) { db.Spec.Version = "15" }, nil},
		{"scaling", func(db *example.Database) { db.Spec.Replicas = ptr.To[int32](5) }, nil},
		{"storage growth", func(db *example.Database) { db.Spec.Storage = "200Gi" }, nil},
		{"storage same size written differently", func(db *example.Database) { db.Spec.Storage = "0100Gi" }, nil},
		{"engine change", func(db *example.Database) { db.Spec.Engine = example.EngineMySQL },
			[]want{{field.ErrorTypeInvalid, "spec.engine", "engine type is immutable"}}},
		{"storage shrink", func(db *example.Database) { db.Spec.Storage = "50Gi" },
			[]want{{field.ErrorTypeInvalid, "spec.storage", "may not shrink from 100Gi to 50Gi: a PersistentVolumeClaim cannot be made smaller"}}},
		{"create rules still apply", func(db *example.Database) { db.Spec.Replicas = ptr.To[int32](11) },
			[]want{{field.ErrorTypeInvalid, "spec.replicas", "replicas cannot exceed 10"}}},
		{"name change", func(db *example.Database) { db.Name = "other" },
			[]want{{field.ErrorTypeInvalid, "metadata.name", "field is immutable"}}},
		{"missing resourceVersion", func(db *example.Database) { db.ResourceVersion = "" },
			[]want{{field.ErrorTypeInvalid, "metadata.resourceVersion", "must be specified for an update"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oldDB := exampleDatabase()
			newDB := exampleDatabase()
			tt.mutate(newDB)
			requireErrors(t, validation.ValidateDatabaseUpdate(newDB, oldDB), tt.wants...)
		})
	}
}

func TestValidateDatabaseUpdateSaysEngineTypeIsImmutable(t *testing.T) {
	newDB := exampleDatabase()
	newDB.Spec.Engine = example.EngineMySQL
	errs := validation.ValidateDatabaseUpdate(newDB, exampleDatabase())
	require.Len(t, errs, 1)
	require.Equal(t, `spec.engine: Invalid value: "mysql": engine type is immutable`, errs[0].Error())
}

func readyCondition() metav1.Condition {
	return metav1.Condition{
		Type:               examplev1.ConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             "AllReplicasReady",
		Message:            "3 of 3 replicas are ready",
		LastTransitionTime: metav1.NewTime(time.Date(2026, time.November, 1, 0, 0, 0, 0, time.UTC)),
	}
}

func TestValidateDatabaseStatusAcceptsWhatTheControllerWrites(t *testing.T) {
	for _, phase := range append([]example.DatabasePhase{""}, example.SupportedPhases...) {
		status := example.DatabaseStatus{
			Phase:              phase,
			ReadyReplicas:      3,
			ObservedGeneration: 2,
			Conditions:         []metav1.Condition{readyCondition()},
			Selector:           "app.kubernetes.io/instance=my-database,app.kubernetes.io/name=postgresql",
		}
		require.Empty(t, validation.ValidateDatabaseStatus(&status, field.NewPath("status")), phase)
	}
	require.Empty(t, validation.ValidateDatabaseStatus(&example.DatabaseStatus{}, field.NewPath("status")))
}

func TestValidateDatabaseStatusReportsEachBrokenRuleOnItsField(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*example.DatabaseStatus)
		want   want
	}{
		{"unknown phase", func(s *example.DatabaseStatus) { s.Phase = "Running" }, want{field.ErrorTypeNotSupported, "status.phase", `"Pending", "Provisioning", "Ready", "Degraded", "Failed", "Deleting"`}},
		{"negative readyReplicas", func(s *example.DatabaseStatus) { s.ReadyReplicas = -1 }, want{field.ErrorTypeInvalid, "status.readyReplicas", "must be greater than or equal to 0"}},
		{"negative observedGeneration", func(s *example.DatabaseStatus) { s.ObservedGeneration = -1 }, want{field.ErrorTypeInvalid, "status.observedGeneration", "must be greater than or equal to 0"}},
		{"duplicate condition type", func(s *example.DatabaseStatus) { s.Conditions = append(s.Conditions, readyCondition()) }, want{field.ErrorTypeDuplicate, "status.conditions[1]", ""}},
		{"condition without reason", func(s *example.DatabaseStatus) { s.Conditions[0].Reason = "" }, want{field.ErrorTypeRequired, "status.conditions[0].reason", ""}},
		{"condition with unknown status", func(s *example.DatabaseStatus) { s.Conditions[0].Status = "Yes" }, want{field.ErrorTypeNotSupported, "status.conditions[0].status", ""}},
		{"unparseable selector", func(s *example.DatabaseStatus) { s.Selector = "app in (" }, want{field.ErrorTypeInvalid, "status.selector", ""}},
		{"selector the scale subresource cannot report", func(s *example.DatabaseStatus) { s.Selector = "a!=b" }, want{field.ErrorTypeInvalid, "status.selector", "!="}},
		{"numeric comparison selector", func(s *example.DatabaseStatus) { s.Selector = "a>1" }, want{field.ErrorTypeInvalid, "status.selector", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := example.DatabaseStatus{Conditions: []metav1.Condition{readyCondition()}}
			tt.mutate(&status)
			requireErrors(t, validation.ValidateDatabaseStatus(&status, field.NewPath("status")), tt.want)
		})
	}
}

func TestValidateDatabaseStatusUpdateChecksMetadataAndStatusNotSpec(t *testing.T) {
	oldDB := exampleDatabase()

	newDB := exampleDatabase()
	newDB.Spec.Replicas = nil // spec is not this subresource's business
	newDB.Status.ReadyReplicas = 3
	require.Empty(t, validation.ValidateDatabaseStatusUpdate(newDB, oldDB))

	newDB.Status.Phase = "Running"
	newDB.Namespace = "other"
	requireErrors(t, validation.ValidateDatabaseStatusUpdate(newDB, oldDB),
		want{field.ErrorTypeInvalid, "metadata.namespace", "field is immutable"},
		want{field.ErrorTypeNotSupported, "status.phase", ""},
	)
}

func TestValidateDatabaseAcceptsEveryPodAsPrimary(t *testing.T) {
	for _, primary := range []string{"", "my-database-0", "my-database-1", "my-database-2"} {
		db := exampleDatabase()
		db.Spec.Primary = primary
		require.Empty(t, validation.ValidateDatabase(db), "primary %q", primary)
	}
}

func TestValidateDatabaseRefusesAPrimaryThatIsNotOneOfItsPods(t *testing.T) {
	for _, primary := range []string{
		"my-database-3",             // ordinal not below spec.replicas
		"my-database-01",            // leading zero: not the Pod's name
		"my-database--1",            // negative
		"my-database-",              // no ordinal
		"my-database",               // the Database, not a Pod
		"other-0",                   // another Database's Pod
		"my-database-0 ",            // not exactly the name
		"my-database-1a",            // not a decimal
		"my-database-9999999999999", // beyond int32
	} {
		t.Run(primary, func(t *testing.T) {
			db := exampleDatabase()
			db.Spec.Primary = primary
			errs := validation.ValidateDatabase(db)
			requireErrors(t, errs, want{field.ErrorTypeInvalid, "spec.primary", "must be one of the Database's Pods: my-database-0 … my-database-2"})
			require.Equal(t, primary, errs[0].BadValue)
		})
	}
}

func TestValidatePrimaryListsThePodsItMayName(t *testing.T) {
	tests := []struct {
		replicas *int32
		detail   string
	}{
		{ptr.To[int32](1), "must be one of the Database's Pods: db-0"},
		{ptr.To[int32](2), "must be one of the Database's Pods: db-0, db-1"},
		{ptr.To[int32](10), "must be one of the Database's Pods: db-0 … db-9"},
	}
	for _, tt := range tests {
		errs := validation.ValidatePrimary("db-10", "db", tt.replicas, field.NewPath("spec", "primary"))
		require.Len(t, errs, 1)
		require.Equal(t, tt.detail, errs[0].Detail)
	}
	// Without a replica count (reported on spec.replicas) only the form is checked.
	require.Empty(t, validation.ValidatePrimary("db-7", "db", nil, field.NewPath("spec", "primary")))
	requireErrors(t, validation.ValidatePrimary("db-07", "db", ptr.To[int32](0), field.NewPath("spec", "primary")),
		want{field.ErrorTypeInvalid, "spec.primary", "must be one of the Database's Pods: db-<ordinal>"})
}

func TestValidateDatabaseUpdateRefusesAScaleDownThatRemovesThePrimary(t *testing.T) {
	tests := []struct {
		name       string
		oldPrimary string
		newPrimary string
		replicas   int32
		wants      []want
	}{
		{"primary kept below the new count", "my-database-1", "my-database-1", 2, nil},
		{"no primary named", "", "", 1, nil},
		{"primary moved in the same write", "my-database-2", "my-database-0", 1, nil},
		{"scale-down to the primary's ordinal", "my-database-2", "my-database-2", 2,
			[]want{{field.ErrorTypeInvalid, "spec.primary", "spec.replicas may not drop from 3 to 2 while spec.primary names this Pod: name one of my-database-0, my-database-1"}}},
		{"scale-down below the primary's ordinal", "my-database-1", "my-database-1", 1,
			[]want{{field.ErrorTypeInvalid, "spec.primary", "while spec.primary names this Pod: name one of my-database-0"}}},
		{"primary moved out of range", "my-database-0", "my-database-1", 1,
			[]want{{field.ErrorTypeInvalid, "spec.primary", "must be one of the Database's Pods: my-database-0"}}},
		{"scale-down to zero is a replicas error only, not a primary one", "my-database-1", "my-database-1", 0,
			[]want{{field.ErrorTypeInvalid, "spec.replicas", "must be at least 1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oldDB := exampleDatabase()
			oldDB.Spec.Primary = tt.oldPrimary
			newDB := exampleDatabase()
			newDB.Spec.Primary = tt.newPrimary
			newDB.Spec.Replicas = ptr.To(tt.replicas)
			requireErrors(t, validation.ValidateDatabaseUpdate(newDB, oldDB), tt.wants...)
		})
	}
}

func TestValidateDatabaseStatusAcceptsMembersAsTheControllerWritesThem(t *testing.T) {
	status := example.DatabaseStatus{
		Primary: "my-database-0",
		Members: []example.DatabaseMember{
			{Name: "my-database-0", Role: example.MemberRolePrimary, Ready: true},
			{Name: "my-database-1", Role: example.MemberRoleReplica, Ready: true, Streaming: true, LagBytes: ptr.To[int64](0)},
			{Name: "my-database-2"}, // not answering: role and lag unknown
		},
	}
	require.Empty(t, validation.ValidateDatabaseStatus(&status, field.NewPath("status")))
}

func TestValidateDatabaseStatusReportsBrokenMembersOnTheirFields(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*example.DatabaseStatus)
		want   want
	}{
		{"primary not a Pod name", func(s *example.DatabaseStatus) { s.Primary = "My_Pod" }, want{field.ErrorTypeInvalid, "status.primary", "RFC 1123"}},
		{"member without name", func(s *example.DatabaseStatus) { s.Members[1].Name = "" }, want{field.ErrorTypeRequired, "status.members[1].name", ""}},
		{"member name twice", func(s *example.DatabaseStatus) { s.Members[1].Name = "db-0" }, want{field.ErrorTypeDuplicate, "status.members[1].name", ""}},
		{"member name not a Pod name", func(s *example.DatabaseStatus) { s.Members[1].Name = "DB 1" }, want{field.ErrorTypeInvalid, "status.members[1].name", "RFC 1123"}},
		{"unknown role", func(s *example.DatabaseStatus) { s.Members[1].Role = "Leader" }, want{field.ErrorTypeNotSupported, "status.members[1].role", `"Primary", "Replica"`}},
		{"negative lag", func(s *example.DatabaseStatus) { s.Members[1].LagBytes = ptr.To[int64](-1) }, want{field.ErrorTypeInvalid, "status.members[1].lagBytes", "must be greater than or equal to 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := example.DatabaseStatus{Members: []example.DatabaseMember{
				{Name: "db-0", Role: example.MemberRolePrimary, Ready: true},
				{Name: "db-1", Role: example.MemberRoleReplica, Streaming: true, LagBytes: ptr.To[int64](8192)},
			}}
			tt.mutate(&status)
			requireErrors(t, validation.ValidateDatabaseStatus(&status, field.NewPath("status")), tt.want)
		})
	}
}

// Every engine replicates: spec.primary may name any of the Database's Pods.
func TestValidateDatabaseAllowsAPrimaryOnEveryEngine(t *testing.T) {
	for engine, version := range map[example.Engine]string{example.EngineMySQL: "8.4", example.EngineMongoDB: "7.0", example.EnginePostgreSQL: "16"} {
		t.Run(string(engine), func(t *testing.T) {
			db := exampleDatabase()
			db.Spec.Engine, db.Spec.Version, db.Spec.Primary = engine, version, "my-database-1"
			require.Empty(t, validation.ValidateDatabase(db))
			old := db.DeepCopy()
			old.Spec.Primary = ""
			old.ResourceVersion = "1"
			db.ResourceVersion = "1"
			require.Empty(t, validation.ValidateDatabaseUpdate(db, old))

			db.Spec.Primary = "my-database-7"
			requireErrors(t, validation.ValidateDatabase(db), want{field.ErrorTypeInvalid, "spec.primary", ""})
		})
	}
}

func TestValidateDatabaseStatusUpdateRefusesAPrimaryThatIsNoneOfItsPods(t *testing.T) {
	oldDB := exampleDatabase()
	for _, primary := range []string{"my-database-0", "my-database-9"} {
		newDB := exampleDatabase()
		newDB.Status.Primary = primary
		require.Empty(t, validation.ValidateDatabaseStatusUpdate(newDB, oldDB), primary)
	}
	for _, primary := range []string{"my-database-10", "other-0", "my-database-01"} {
		newDB := exampleDatabase()
		newDB.Status.Primary = primary
		requireErrors(t, validation.ValidateDatabaseStatusUpdate(newDB, oldDB),
			want{field.ErrorTypeInvalid, "status.primary", "must be one of the Pods the Database may have: my-database-0 … my-database-9"})
	}
}

// status.switchoverProgress names two different Pods the Database may have, at a step of
// example.SupportedSwitchoverSteps; each broken rule is reported on its field.
func TestValidateDatabaseStatusUpdateChecksTheSwitchoverProgress(t *testing.T) {
	oldDB := exampleDatabase()
	for _, step := range example.SupportedSwitchoverSteps {
		newDB := exampleDatabase()
		newDB.Status.SwitchoverProgress = &example.DatabaseSwitchoverProgress{From: "my-database-0", To: "my-database-9", Step: step}
		require.Empty(t, validation.ValidateDatabaseStatusUpdate(newDB, oldDB), step)
	}
	const pods = "must be one of the Pods the Database may have: my-database-0 … my-database-9"
	for _, tc := range []struct {
		progress example.DatabaseSwitchoverProgress
		want     []want
	}{
		{example.DatabaseSwitchoverProgress{To: "my-database-1", Step: "Preparing"},
			[]want{{field.ErrorTypeRequired, "status.switchoverProgress.from", ""}}},
		{example.DatabaseSwitchoverProgress{From: "my-database-0", Step: "Promoting"},
			[]want{{field.ErrorTypeRequired, "status.switchoverProgress.to", ""}}},
		{example.DatabaseSwitchoverProgress{From: "other-0", To: "my-database-10", Step: "Electing"},
			[]want{{field.ErrorTypeInvalid, "status.switchoverProgress.from", pods}, {field.ErrorTypeInvalid, "status.switchoverProgress.to", pods}}},
		{example.DatabaseSwitchoverProgress{From: "my-database-1", To: "my-database-1", Step: "StoppingPrimary"},
			[]want{{field.ErrorTypeInvalid, "status.switchoverProgress.to", "must not be from: a switchover moves the primary to another Pod"}}},
		{example.DatabaseSwitchoverProgress{From: "my-database-0", To: "my-database-1", Step: "Failover"},
			[]want{{field.ErrorTypeNotSupported, "status.switchoverProgress.step", `supported values: "Preparing", "StoppingPrimary", "Promoting", "Electing"`}}},
	} {
		newDB := exampleDatabase()
		newDB.Status.SwitchoverProgress = tc.progress.DeepCopy()
		requireErrors(t, validation.ValidateDatabaseStatusUpdate(newDB, oldDB), tc.want...)
	}
}

// status.replicaSetMembers names Pods the Database may have, each once.
func TestValidateDatabaseStatusUpdateChecksTheReplicaSetMembers(t *testing.T) {
	oldDB := exampleDatabase()
	newDB := exampleDatabase()
	newDB.Status.ReplicaSetMembers = []string{"my-database-0", "my-database-9"}
	require.Empty(t, validation.ValidateDatabaseStatusUpdate(newDB, oldDB))
	newDB.Status.ReplicaSetMembers = []string{"my-database-0", "", "other-1", "my-database-0"}
	requireErrors(t, validation.ValidateDatabaseStatusUpdate(newDB, oldDB),
		want{field.ErrorTypeRequired, "status.replicaSetMembers[1]", ""},
		want{field.ErrorTypeInvalid, "status.replicaSetMembers[2]", "must be one of the Pods the Database may have: my-database-0 … my-database-9"},
		want{field.ErrorTypeDuplicate, "status.replicaSetMembers[3]", ""})
}

// More than one MySQL replica on an 8.0 release before 8.0.23 is Forbidden on every write:
// on create, and on an update (a scale-up through the scale subresource is one) that makes
// it so; a Database stored so is not judged again.
func TestReplicationReleaseForbidsMySQLReplicasBefore8023(t *testing.T) {
	mysql := func(version string, replicas int32) *example.Database {
		db := exampleDatabase()
		db.Spec.Engine, db.Spec.Version, db.Spec.Replicas = example.EngineMySQL, version, ptr.To(replicas)
		db.ResourceVersion = "1"
		return db
	}
	const msg = "mysql 8.0.22 cannot replicate: more than one replica needs 8.0.23 or later (CHANGE REPLICATION SOURCE TO), 8.4 or 9.x; or replicas: 1"
	requireErrors(t, validation.ValidateDatabase(mysql("8.0.22", 3)), want{field.ErrorTypeForbidden, "spec.version", msg})
	require.Empty(t, validation.ValidateDatabase(mysql("8.0.22", 1)), "one replica does not replicate")

	requireErrors(t, validation.ValidateDatabaseUpdate(mysql("8.0.22", 3), mysql("8.0.22", 1)),
		want{field.ErrorTypeForbidden, "spec.version", msg})
	requireErrors(t, validation.ValidateDatabaseUpdate(mysql("8.0.11", 3), mysql("8.0.23", 3)),
		want{field.ErrorTypeForbidden, "spec.version", "mysql 8.0.11 cannot replicate"})
	stored, updated := mysql("8.0.22", 3), mysql("8.0.22", 3)
	updated.Spec.Storage = "200Gi"
	require.Empty(t, validation.ValidateDatabaseUpdate(updated, stored), "stored so")

	for _, v := range []string{"8.0.23", "8.0", "8.4", "9.1"} {
		require.Empty(t, validation.ValidateDatabase(mysql(v, 3)), v)
	}
	pg := mysql("8.0.22", 3)
	pg.Spec.Engine, pg.Spec.Version = example.EnginePostgreSQL, "14.5"
	require.Empty(t, validation.ValidateDatabase(pg))
}

func TestValidateDatabaseAcceptsANetworkPolicy(t *testing.T) {
	for _, policy := range []*example.DatabaseNetworkPolicy{
		{},
		{From: []example.DatabaseNetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
		{From: []example.DatabaseNetworkPolicyPeer{
			{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}},
			{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"payments", "billing"}}}}},
			{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "web"}},
				PodSelector:       &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}},
			},
		}},
		{From: make([]example.DatabaseNetworkPolicyPeer, validation.MaxNetworkPolicyPeers)},
	} {
		for i := range policy.From {
			if policy.From[i] == (example.DatabaseNetworkPolicyPeer{}) {
				policy.From[i].PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"n": strconv.Itoa(i)}}
			}
		}
		db := exampleDatabase()
		db.Spec.NetworkPolicy = policy
		require.Empty(t, validation.ValidateDatabase(db), "%+v", policy)
	}
}

func TestValidateNetworkPolicyReportsEachBrokenPeerOnItsField(t *testing.T) {
	shop := example.DatabaseNetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}
	tests := []struct {
		name  string
		from  []example.DatabaseNetworkPolicyPeer
		wants []want
	}{
		{"a peer without a selector", []example.DatabaseNetworkPolicyPeer{shop, {}},
			[]want{{field.ErrorTypeRequired, "spec.networkPolicy.from[1]", "must set podSelector, namespaceSelector or both"}}},
		{"a label key that is not one", []example.DatabaseNetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"not a key": "x"}}}},
			[]want{{field.ErrorTypeInvalid, "spec.networkPolicy.from[0].podSelector.matchLabels", "name part must consist of alphanumeric characters"}}},
		{"a label value that is not one", []example.DatabaseNetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a/b"}}}},
			[]want{{field.ErrorTypeInvalid, "spec.networkPolicy.from[0].namespaceSelector.matchLabels", "a valid label must be"}}},
		{"an unknown operator", []example.DatabaseNetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: "Like", Values: []string{"api"}}}}}},
			[]want{{field.ErrorTypeInvalid, "spec.networkPolicy.from[0].podSelector.matchExpressions[0].operator", "not a valid selector operator"}}},
		{"In without values", []example.DatabaseNetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}}},
			[]want{{field.ErrorTypeRequired, "spec.networkPolicy.from[0].podSelector.matchExpressions[0].values", "must be specified when `operator` is 'In' or 'NotIn'"}}},
		{"too many label terms", []example.DatabaseNetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: manyValues(validation.MaxNetworkPolicyTerms)}}}}},
			[]want{{field.ErrorTypeInvalid, "spec.networkPolicy.from", "at most 512 label terms in all"}}},
		{"too many peers", slices.Repeat([]example.DatabaseNetworkPolicyPeer{shop}, validation.MaxNetworkPolicyPeers+1),
			[]want{{field.ErrorTypeTooMany, "spec.networkPolicy.from", "must have at most 16 items"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := exampleDatabase()
			db.Spec.NetworkPolicy = &example.DatabaseNetworkPolicy{From: tt.from}
			requireErrors(t, validation.ValidateDatabaseSpec(&db.Spec, field.NewPath("spec")), tt.wants...)
		})
	}
}

// manyValues is n distinct label values.
func manyValues(n int) []string {
	values := make([]string, n)
	for i := range values {
		values[i] = "v" + strconv.Itoa(i)
	}
	return values
}

func TestValidateNetworkPolicyAcceptsMaxNetworkPolicyTerms(t *testing.T) {
	db := exampleDatabase()
	db.Spec.NetworkPolicy = &example.DatabaseNetworkPolicy{From: []example.DatabaseNetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: manyValues(validation.MaxNetworkPolicyTerms - 1)}}}}}}
	require.Empty(t, validation.ValidateDatabase(db))
}

func TestValidateFailoverAcceptsEveryPolicyDurabilityAndDelayInBounds(t *testing.T) {
	for _, failover := range append([]example.FailoverPolicy{""}, example.SupportedFailoverPolicies...) {
		for _, durability := range append([]example.Durability{""}, example.SupportedDurabilities...) {
			for _, delay := range []*int32{nil, ptr.To[int32](1), ptr.To[int32](3600)} {
				for _, engine := range []example.Engine{example.EnginePostgreSQL, example.EngineMySQL} {
					db := exampleDatabase()
					db.Spec.Engine, db.Spec.Version = engine, "8.4"
					db.Spec.Failover, db.Spec.Durability, db.Spec.FailoverDelaySeconds = failover, durability, delay
					require.Empty(t, validation.ValidateDatabase(db), "%+v", db.Spec)
				}
			}
		}
	}
}

func TestValidateFailoverReportsEachBrokenRuleOnItsField(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*example.DatabaseSpec)
		want   want
	}{
		{"unknown failover", func(s *example.DatabaseSpec) { s.Failover = "Sometimes" },
			want{field.ErrorTypeNotSupported, "spec.failover", `supported values: "Automatic", "Manual"`}},
		{"failover in the wrong case", func(s *example.DatabaseSpec) { s.Failover = "automatic" },
			want{field.ErrorTypeNotSupported, "spec.failover", ""}},
		{"zero delay", func(s *example.DatabaseSpec) { s.FailoverDelaySeconds = ptr.To[int32](0) },
			want{field.ErrorTypeInvalid, "spec.failoverDelaySeconds", "must be a number of seconds from 1 to 3600"}},
		{"negative delay", func(s *example.DatabaseSpec) { s.FailoverDelaySeconds = ptr.To[int32](-5) },
			want{field.ErrorTypeInvalid, "spec.failoverDelaySeconds", "from 1 to 3600"}},
		{"delay above an hour", func(s *example.DatabaseSpec) { s.FailoverDelaySeconds = ptr.To[int32](3601) },
			want{field.ErrorTypeInvalid, "spec.failoverDelaySeconds", "from 1 to 3600"}},
		{"unknown durability", func(s *example.DatabaseSpec) { s.Durability = "Eventual" },
			want{field.ErrorTypeNotSupported, "spec.durability", `supported values: "Asynchronous", "Synchronous"`}},
		{"synchronous with one server", func(s *example.DatabaseSpec) {
			s.Durability, s.Replicas = example.DurabilitySynchronous, ptr.To[int32](1)
		}, want{field.ErrorTypeInvalid, "spec.durability", "needs spec.replicas of 2 or more"}},
		{"failover on a replica set", func(s *example.DatabaseSpec) {
			s.Engine, s.Version, s.Failover = example.EngineMongoDB, "7.0", example.FailoverManual
		},
			want{field.ErrorTypeForbidden, "spec.failover", "mongodb elects its primary among its members by itself"}},
		{"delay on a replica set", func(s *example.DatabaseSpec) {
			s.Engine, s.Version, s.FailoverDelaySeconds = example.EngineMongoDB, "7.0", ptr.To[int32](10)
		}, want{field.ErrorTypeForbidden, "spec.failoverDelaySeconds", "by itself"}},
		{"durability on a replica set", func(s *example.DatabaseSpec) {
			s.Engine, s.Version, s.Durability = example.EngineMongoDB, "7.0", example.DurabilitySynchronous
		}, want{field.ErrorTypeForbidden, "spec.durability", "the write concern its client asks for"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := exampleDatabase()
			tt.mutate(&db.Spec)
			requireErrors(t, validation.ValidateDatabaseSpec(&db.Spec, field.NewPath("spec")), tt.want)
		})
	}
}

func TestValidateDatabaseUpdateRefusesAScaleToOneServerOfASynchronousDatabase(t *testing.T) {
	stored := exampleDatabase()
	stored.Spec.Durability = example.DurabilitySynchronous
	scaled := stored.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](1)
	requireErrors(t, validation.ValidateDatabaseUpdate(scaled, stored),
		want{field.ErrorTypeInvalid, "spec.durability", "needs spec.replicas of 2 or more"})
}

// takingBackups makes the supported engines named take backups (EngineRules.Backups) and the
// others not, each keeping its other rules, until t ends: the backup tests do not depend on
// which engine packages implement engine.Backups.
func takingBackups(t *testing.T, engines ...example.Engine) {
	t.Helper()
	for _, e := range example.SupportedEngines {
		old, had := validation.EngineRulesOf(e)
		rules := old
		rules.Backups = slices.Contains(engines, e)
		validation.RegisterEngineRules(e, rules)
		t.Cleanup(func() {
			if had {
				validation.RegisterEngineRules(e, old)
			} else {
				validation.UnregisterEngineRules(e)
			}
		})
	}
}

// exampleBackup is a spec.backup as a user writes one, every field set.
func exampleBackup() *example.DatabaseBackupPolicy {
	return &example.DatabaseBackupPolicy{
		Schedule:             "0 3 * * *",
		RetentionFullBackups: ptr.To[int32](7),
		S3: example.DatabaseBackupS3{
			Endpoint:   "https://s3.example.com:8443",
			Bucket:     "db-backups",
			Prefix:     "/backups/prod",
			Region:     "eu-west-1",
			SecretName: "s3-credentials",
		},
	}
}

func TestValidateDatabaseAcceptsABackup(t *testing.T) {
	takingBackups(t, example.EnginePostgreSQL)
	tests := []struct {
		name   string
		mutate func(*example.DatabaseBackupPolicy)
	}{
		{"every field set", func(*example.DatabaseBackupPolicy) {}},
		{"no schedule: changes are archived, backups taken on request", func(b *example.DatabaseBackupPolicy) { b.Schedule = "" }},
		{"schedule with steps, ranges and names", func(b *example.DatabaseBackupPolicy) { b.Schedule = "*/15 1-5 * JAN-DEC MON-FRI" }},
		// robfig/cron's standard parser, which a CronJob's schedule goes through, takes its
		// descriptors of a time of day: "@daily" is "0 0 * * *".
		{"the @daily descriptor", func(b *example.DatabaseBackupPolicy) { b.Schedule = "@daily" }},
		{"retention unset", func(b *example.DatabaseBackupPolicy) { b.RetentionFullBackups = nil }},
		{"retention of 1", func(b *example.DatabaseBackupPolicy) { b.RetentionFullBackups = ptr.To[int32](1) }},
		{"retention of 100", func(b *example.DatabaseBackupPolicy) { b.RetentionFullBackups = ptr.To[int32](100) }},
		{"endpoint without a port", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://s3.example.com" }},
		{"endpoint with a trailing slash", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://s3.example.com/" }},
		{"endpoint with the port 65535", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://s3.example.com:65535" }},
		// DNS names are case-insensitive, and so is pgBackRest's check of the certificate.
		{"endpoint in mixed case", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://S3.Example.com" }},
		{"endpoint a Service of the cluster", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://minio.backup.svc:9000" }},
		{"endpoint of one label", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://minio" }},
		{"endpoint whose first label is a number", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://123.s3.example.com" }},
		{"bucket with dots and hyphens", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = "my.bucket-1" }},
		{"bucket of 3 characters", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = "abc" }},
		{"bucket of 63 characters", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = strings.Repeat("a", 63) }},
		{"no prefix", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "" }},
		{"prefix /", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "/" }},
		{"prefix with dots, underscores and capitals", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "/Backups/pg_16/v1.2/..." }},
		{"prefix of 256 characters", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "/" + strings.Repeat("a", 255) }},
		{"no region", func(b *example.DatabaseBackupPolicy) { b.S3.Region = "" }},
		{"region of one word", func(b *example.DatabaseBackupPolicy) { b.S3.Region = "auto" }},
		{"secret name with dots", func(b *example.DatabaseBackupPolicy) { b.S3.SecretName = "s3.credentials" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := exampleDatabase()
			db.Spec.Backup = exampleBackup()
			tt.mutate(db.Spec.Backup)
			require.Empty(t, validation.ValidateDatabase(db))

			stored := exampleDatabase()
			require.Empty(t, validation.ValidateDatabaseUpdate(db, stored), "set on an update")
		})
	}
}

// spec.backup on an engine that takes no backups is Forbidden, naming the engines that do,
// and nothing in it is judged further.
func TestValidateBackupIsForbiddenOnAnEngineThatTakesNone(t *testing.T) {
	specOf := func(engine example.Engine, version string) *example.DatabaseSpec {
		spec := exampleDatabase().Spec
		spec.Engine, spec.Version, spec.Backup = engine, version, exampleBackup()
		return &spec
	}
	t.Run("postgresql takes backups", func(t *testing.T) {
		takingBackups(t, example.EnginePostgreSQL)
		require.Empty(t, validation.ValidateDatabaseSpec(specOf(example.EnginePostgreSQL, "16"), field.NewPath("spec")))

		for engine, version := range map[example.Engine]string{example.EngineMySQL: "8.4", example.EngineMongoDB: "7.0"} {
			errs := validation.ValidateDatabaseSpec(specOf(engine, version), field.NewPath("spec"))
			requireErrors(t, errs, want{field.ErrorTypeForbidden, "spec.backup", ""})
			require.Equal(t, "spec.backup: Forbidden: "+string(engine)+" Databases take no backups yet; engines that do: postgresql", errs[0].Error())
		}

		spec := specOf(example.EngineMySQL, "8.4")
		spec.Backup.Schedule, spec.Backup.S3 = "* * *", example.DatabaseBackupS3{}
		requireErrors(t, validation.ValidateDatabaseSpec(spec, field.NewPath("spec")),
			want{field.ErrorTypeForbidden, "spec.backup", "mysql Databases take no backups yet"})
	})
	t.Run("every engine that does is named", func(t *testing.T) {
		takingBackups(t, example.EngineMongoDB, example.EnginePostgreSQL)
		requireErrors(t, validation.ValidateDatabaseSpec(specOf(example.EngineMySQL, "8.4"), field.NewPath("spec")),
			want{field.ErrorTypeForbidden, "spec.backup", "mysql Databases take no backups yet; engines that do: postgresql, mongodb"})
	})
	t.Run("no engine does", func(t *testing.T) {
		takingBackups(t)
		requireErrors(t, validation.ValidateDatabaseSpec(specOf(example.EnginePostgreSQL, "16"), field.NewPath("spec")),
			want{field.ErrorTypeForbidden, "spec.backup", "postgresql Databases take no backups yet; no engine does yet"})
	})
	t.Run("an unknown engine", func(t *testing.T) {
		takingBackups(t, example.EnginePostgreSQL)
		requireErrors(t, validation.ValidateDatabaseSpec(specOf("oracle", "19"), field.NewPath("spec")),
			want{field.ErrorTypeNotSupported, "spec.engine", ""},
			want{field.ErrorTypeForbidden, "spec.backup", "oracle Databases take no backups yet; engines that do: postgresql"})
	})
	t.Run("no engine: the engine is Required, the backup judged", func(t *testing.T) {
		takingBackups(t, example.EnginePostgreSQL)
		spec := specOf("", "16")
		spec.Backup.S3.Bucket = ""
		requireErrors(t, validation.ValidateDatabaseSpec(spec, field.NewPath("spec")),
			want{field.ErrorTypeRequired, "spec.engine", ""},
			want{field.ErrorTypeRequired, "spec.backup.s3.bucket", ""})
	})
}

func TestValidateBackupReportsEachBrokenRuleOnItsField(t *testing.T) {
	takingBackups(t, example.EnginePostgreSQL)
	const (
		cronFields = `must be five cron fields, minute hour day-of-month month day-of-week, e.g. "0 3 * * *": `
		noTZ       = "must not name a time zone: the schedule is in UTC"
		retention  = "must be from 1 to 100"
		endpoint   = `must be "https://<DNS name>[:<port>]", e.g. "https://s3.example.com"`
		ip         = endpoint + ": an IP address cannot be verified against the store's certificate"
		port       = endpoint + ": the port must be from 1 to 65535"
		bucket     = "must be 3 to 63 lower-case letters, digits, dots and hyphens, beginning and ending with a letter or digit, no two dots in a row"
		prefix     = `must be "/" or "/"-separated segments of letters, digits, ".", "_" and "-" ("/backups/production"), none of them "." or "..", at most 256 characters`
		region     = `must be a region name of lower-case letters, digits and hyphens, e.g. "us-east-1"`
	)
	tests := []struct {
		name   string
		mutate func(*example.DatabaseBackupPolicy)
		want   want
		exact  bool // want.detail is the whole detail
	}{
		{"minute 61", func(b *example.DatabaseBackupPolicy) { b.Schedule = "61 * * * *" },
			want{field.ErrorTypeInvalid, "spec.backup.schedule", cronFields + "end of range (61) above maximum (59): 61"}, true},
		{"three fields", func(b *example.DatabaseBackupPolicy) { b.Schedule = "* * *" },
			want{field.ErrorTypeInvalid, "spec.backup.schedule", cronFields + "expected exactly 5 fields, found 3: [* * *]"}, true},
		{"six fields, seconds first", func(b *example.DatabaseBackupPolicy) { b.Schedule = "0 0 3 * * *" },
			want{field.ErrorTypeInvalid, "spec.backup.schedule", cronFields + "expected exactly 5 fields, found 6"}, false},
		{"an unknown descriptor", func(b *example.DatabaseBackupPolicy) { b.Schedule = "@reboot" },
			want{field.ErrorTypeInvalid, "spec.backup.schedule", cronFields + "unrecognized descriptor: @reboot"}, true},
		{"a descriptor in capitals", func(b *example.DatabaseBackupPolicy) { b.Schedule = "@DAILY" },
			want{field.ErrorTypeInvalid, "spec.backup.schedule", "unrecognized descriptor: @DAILY"}, false},
		{"CRON_TZ", func(b *example.DatabaseBackupPolicy) { b.Schedule = "CRON_TZ=Europe/Paris 0 3 * * *" },
			want{field.ErrorTypeInvalid, "spec.backup.schedule", noTZ}, true},
		{"TZ", func(b *example.DatabaseBackupPolicy) { b.Schedule = "TZ=UTC 0 3 * * *" },
			want{field.ErrorTypeInvalid, "spec.backup.schedule", noTZ}, true},

		{"retention of 0", func(b *example.DatabaseBackupPolicy) { b.RetentionFullBackups = ptr.To[int32](0) },
			want{field.ErrorTypeInvalid, "spec.backup.retentionFullBackups", retention}, true},
		{"retention of 101", func(b *example.DatabaseBackupPolicy) { b.RetentionFullBackups = ptr.To[int32](101) },
			want{field.ErrorTypeInvalid, "spec.backup.retentionFullBackups", retention}, true},
		{"negative retention", func(b *example.DatabaseBackupPolicy) { b.RetentionFullBackups = ptr.To[int32](-1) },
			want{field.ErrorTypeInvalid, "spec.backup.retentionFullBackups", retention}, true},

		{"no endpoint", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "" },
			want{field.ErrorTypeRequired, "spec.backup.s3.endpoint", `an HTTPS URL, e.g. "https://s3.example.com"`}, true},
		{"endpoint over HTTP", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "http://s3.example.com" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", endpoint}, true},
		{"endpoint without a scheme", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "s3.example.com" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", endpoint}, true},
		{"endpoint an IPv4 address", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://10.0.0.1" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", ip}, true},
		{"endpoint an IPv6 address", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://[::1]:9000" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", ip}, true},
		// IPv4 addresses in the forms resolvers take besides the dotted quad (inet_aton).
		{"endpoint a short IPv4 address", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://10.1" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", ip}, true},
		{"endpoint an IPv4 address in octal", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://010.0.0.1:9000" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", ip}, true},
		{"endpoint an IPv4 address in hexadecimal", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://0x0A000001" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", ip}, true},
		{"endpoint with a path", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://s3.example.com/path" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", endpoint}, true},
		{"endpoint with a user", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://user@s3.example.com" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", endpoint}, true},
		{"endpoint with a user and password", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://key:secret@s3.example.com" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", endpoint}, true},
		{"endpoint with a query", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://s3.example.com?region=x" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", endpoint}, true},
		{"endpoint with a fragment", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://s3.example.com#x" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", endpoint}, true},
		{"endpoint on port 0", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://s3.example.com:0" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", port}, true},
		{"endpoint on port 99999", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://s3.example.com:99999" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", port}, true},
		{"endpoint with a port that is no number", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://s3.example.com:https" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", endpoint}, true},
		{"endpoint without a host", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://:9000" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", endpoint + ": "}, false},
		{"endpoint host with an underscore", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://s3_store.example.com" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", endpoint + ": a lowercase RFC 1123 subdomain must consist of"}, false},

		{"no bucket", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = "" },
			want{field.ErrorTypeRequired, "spec.backup.s3.bucket", ""}, true},
		{"bucket of 2 characters", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = "ab" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.bucket", bucket}, true},
		{"bucket of 64 characters", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = strings.Repeat("a", 64) },
			want{field.ErrorTypeTooLong, "spec.backup.s3.bucket", "may not be more than 63 bytes"}, false},
		{"bucket with a capital", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = "Bucket" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.bucket", bucket}, true},
		{"bucket beginning with a hyphen", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = "-abc" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.bucket", bucket}, true},
		{"bucket ending with a dot", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = "abc." },
			want{field.ErrorTypeInvalid, "spec.backup.s3.bucket", bucket}, true},
		{"bucket with two dots in a row", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = "a..b" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.bucket", bucket}, true},
		{"bucket with an underscore", func(b *example.DatabaseBackupPolicy) { b.S3.Bucket = "my_bucket" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.bucket", bucket}, true},

		{"prefix without a leading slash", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "backups" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.prefix", prefix}, true},
		{"prefix with an empty segment", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "/a//b" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.prefix", prefix}, true},
		{"prefix with a trailing slash", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "/a/" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.prefix", prefix}, true},
		{"prefix with a space", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "/a b" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.prefix", prefix}, true},
		{"prefix of 257 characters", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "/" + strings.Repeat("a", 256) },
			want{field.ErrorTypeTooLong, "spec.backup.s3.prefix", "may not be more than 256 bytes"}, false},
		{"prefix with a .. segment", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "/backups/../prod" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.prefix", prefix}, true},
		{"prefix /..", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "/.." },
			want{field.ErrorTypeInvalid, "spec.backup.s3.prefix", prefix}, true},
		{"prefix with a . segment", func(b *example.DatabaseBackupPolicy) { b.S3.Prefix = "/./backups" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.prefix", prefix}, true},

		{"region in capitals", func(b *example.DatabaseBackupPolicy) { b.S3.Region = "US-EAST-1" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.region", region}, true},
		{"region with an underscore", func(b *example.DatabaseBackupPolicy) { b.S3.Region = "us_east" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.region", region}, true},
		{"region ending with a hyphen", func(b *example.DatabaseBackupPolicy) { b.S3.Region = "us-east-" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.region", region}, true},
		{"region of 65 characters", func(b *example.DatabaseBackupPolicy) { b.S3.Region = strings.Repeat("a", 65) },
			want{field.ErrorTypeTooLong, "spec.backup.s3.region", "may not be more than 64 bytes"}, false},

		{"no secret name", func(b *example.DatabaseBackupPolicy) { b.S3.SecretName = "" },
			want{field.ErrorTypeRequired, "spec.backup.s3.secretName", "a Secret of the Database's namespace with the keys accessKeyId and secretAccessKey"}, true},
		{"secret name not a Secret's", func(b *example.DatabaseBackupPolicy) { b.S3.SecretName = "Bad_Name" },
			want{field.ErrorTypeInvalid, "spec.backup.s3.secretName", "a lowercase RFC 1123 subdomain must consist of"}, false},
		{"secret name of 254 characters", func(b *example.DatabaseBackupPolicy) { b.S3.SecretName = strings.Repeat("a", 254) },
			want{field.ErrorTypeTooLong, "spec.backup.s3.secretName", "may not be more than 253 bytes"}, false},
		{"schedule of 129 characters", func(b *example.DatabaseBackupPolicy) { b.Schedule = "0 3 * * *" + strings.Repeat(" ", 120) },
			want{field.ErrorTypeTooLong, "spec.backup.schedule", "may not be more than 128 bytes"}, false},
		{"schedule every second", func(b *example.DatabaseBackupPolicy) { b.Schedule = "@every 1s" },
			want{field.ErrorTypeInvalid, "spec.backup.schedule", `not an "@every" interval, which could ask for a full backup every second`}, false},
		{"endpoint of 2049 characters", func(b *example.DatabaseBackupPolicy) { b.S3.Endpoint = "https://" + strings.Repeat("a", 2041) },
			want{field.ErrorTypeTooLong, "spec.backup.s3.endpoint", "may not be more than 2048 bytes"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := exampleDatabase()
			db.Spec.Backup = exampleBackup()
			tt.mutate(db.Spec.Backup)
			errs := validation.ValidateDatabaseSpec(&db.Spec, field.NewPath("spec"))
			requireErrors(t, errs, tt.want)
			if tt.exact {
				require.Equal(t, tt.want.detail, errs[0].Detail)
			}
		})
	}
}

func TestValidateBackupReportsEveryBrokenFieldAtOnce(t *testing.T) {
	takingBackups(t, example.EnginePostgreSQL)
	db := exampleDatabase()
	db.Spec.Backup = &example.DatabaseBackupPolicy{
		Schedule:             "* * *",
		RetentionFullBackups: ptr.To[int32](0),
		S3: example.DatabaseBackupS3{
			Endpoint: "https://10.0.0.1",
			Bucket:   "ab",
			Prefix:   "backups",
			Region:   "US-EAST-1",
		},
	}
	errs := validation.ValidateDatabase(db)
	requireErrors(t, errs,
		want{field.ErrorTypeInvalid, "spec.backup.schedule", "must be five cron fields"},
		want{field.ErrorTypeInvalid, "spec.backup.retentionFullBackups", "must be from 1 to 100"},
		want{field.ErrorTypeInvalid, "spec.backup.s3.endpoint", "an IP address cannot be verified"},
		want{field.ErrorTypeInvalid, "spec.backup.s3.bucket", "must be 3 to 63"},
		want{field.ErrorTypeInvalid, "spec.backup.s3.prefix", `must be "/" or`},
		want{field.ErrorTypeInvalid, "spec.backup.s3.region", "must be a region name"},
		want{field.ErrorTypeRequired, "spec.backup.s3.secretName", ""},
	)
	require.Equal(t, `spec.backup.retentionFullBackups: Invalid value: 0: must be from 1 to 100`, errs[1].Error())

	// An empty spec.backup: the store's endpoint, bucket and Secret are required.
	db.Spec.Backup = &example.DatabaseBackupPolicy{}
	requireErrors(t, validation.ValidateDatabase(db),
		want{field.ErrorTypeRequired, "spec.backup.s3.endpoint", ""},
		want{field.ErrorTypeRequired, "spec.backup.s3.bucket", ""},
		want{field.ErrorTypeRequired, "spec.backup.s3.secretName", ""},
	)

	// Alongside the spec's other errors, and on an update as on create.
	db.Spec.Backup = exampleBackup()
	db.Spec.Backup.S3.Bucket = "Bucket"
	db.Spec.Replicas = ptr.To[int32](11)
	requireErrors(t, validation.ValidateDatabaseUpdate(db, exampleDatabase()),
		want{field.ErrorTypeInvalid, "spec.replicas", "replicas cannot exceed 10"},
		want{field.ErrorTypeInvalid, "spec.backup.s3.bucket", "must be 3 to 63"},
	)
}

func TestValidateBackupUsesTheGivenPath(t *testing.T) {
	takingBackups(t, example.EnginePostgreSQL)
	spec := exampleDatabase().Spec
	spec.Backup = exampleBackup()
	spec.Backup.S3.Region = "us_east"
	requireErrors(t, validation.ValidateBackup(&spec, field.NewPath("backup")), want{field.ErrorTypeInvalid, "backup.s3.region", "must be a region name"})
}

// spec.restore names a Database of the namespace and needs spec.backup, whose store it
// restores from; it is immutable; on an engine without backups it is Forbidden.
// A pointInTime is checked against the window's first time when it is known, and against
// now always; what does not parse, or no time, is left to ValidateRestore.
func TestValidateRestoreWindow(t *testing.T) {
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	first := metav1.NewTime(now.Add(-72 * time.Hour))
	restoring := func(at string) *example.DatabaseSpec {
		return &example.DatabaseSpec{Restore: &example.DatabaseRestore{Database: "ledger", PointInTime: at}}
	}
	path := field.NewPath("spec", "restore")
	for _, ok := range []struct {
		at    string
		first *metav1.Time
	}{
		{"2026-12-02T08:00:00Z", &first}, // the window's first moment
		{"2026-12-05T08:00:00Z", &first}, // now
		{"2026-12-04T09:00:00.5+01:00", &first},
		{"2026-11-01T00:00:00Z", nil}, // a window not known
		{"", &first},
		{"yesterday", &first},
	} {
		require.Empty(t, validation.ValidateRestoreWindow(restoring(ok.at), ok.first, now, path), ok.at)
	}
	require.Empty(t, validation.ValidateRestoreWindow(&example.DatabaseSpec{}, &first, now, path))

	for at, detail := range map[string]string{
		"2026-12-02T07:59:59Z": `must be within the recoverability window of Database "ledger": from 2026-12-02T08:00:00Z (just after the end of the oldest backup its store keeps) to now (2026-12-05T08:00:00Z)`,
		"2026-12-05T08:00:01Z": `must be within the recoverability window of Database "ledger": from 2026-12-02T08:00:00Z`,
	} {
		errs := validation.ValidateRestoreWindow(restoring(at), &first, now, path)
		require.Len(t, errs, 1, at)
		require.Equal(t, field.ErrorTypeInvalid, errs[0].Type)
		require.Equal(t, "spec.restore.pointInTime", errs[0].Field)
		require.Equal(t, at, errs[0].BadValue)
		require.Contains(t, errs[0].Detail, detail)
	}
	errs := validation.ValidateRestoreWindow(restoring("2026-12-06T00:00:00Z"), nil, now, path)
	require.Len(t, errs, 1)
	require.Equal(t, "spec.restore.pointInTime", errs[0].Field)
	require.Equal(t, "must not be later than now (2026-12-05T08:00:00Z): no change after it is archived yet", errs[0].Detail)
}

func TestValidateRestore(t *testing.T) {
	takingBackups(t, example.EnginePostgreSQL)
	const at = "2026-12-05T04:59:30Z"
	restoring := func(restore *example.DatabaseRestore, backup bool) *example.Database {
		db := exampleDatabase()
		db.Spec.Restore = restore
		if backup {
			db.Spec.Backup = exampleBackup()
		}
		return db
	}
	require.Empty(t, validation.ValidateDatabase(restoring(&example.DatabaseRestore{Database: "ledger"}, true)))
	require.Empty(t, validation.ValidateDatabase(restoring(&example.DatabaseRestore{Database: "ledger", PointInTime: at}, true)))

	tests := []struct {
		name    string
		db      *example.Database
		typ     field.ErrorType
		field   string
		message string
	}{
		{"without spec.backup", restoring(&example.DatabaseRestore{Database: "ledger"}, false),
			field.ErrorTypeForbidden, "spec.restore", "needs spec.backup: the store to restore from is spec.backup.s3's"},
		{"no source", restoring(&example.DatabaseRestore{}, true), field.ErrorTypeRequired, "spec.restore.database", ""},
		{"a source that is no Database name", restoring(&example.DatabaseRestore{Database: "Ledger_1"}, true),
			field.ErrorTypeInvalid, "spec.restore.database", "a DNS-1035 label must consist of lower case"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := validation.ValidateDatabase(tt.db)
			require.Len(t, errs, 1, errs)
			require.Equal(t, tt.typ, errs[0].Type, errs)
			require.Equal(t, tt.field, errs[0].Field, errs)
			require.Contains(t, errs[0].Detail, tt.message)
		})
	}

	t.Run("on an engine without backups", func(t *testing.T) {
		takingBackups(t)
		db := restoring(&example.DatabaseRestore{Database: "ledger"}, false)
		errs := validation.ValidateDatabaseSpec(&db.Spec, field.NewPath("spec"))
		require.Len(t, errs, 1, errs)
		require.Equal(t, field.ErrorTypeForbidden, errs[0].Type)
		require.Equal(t, "spec.restore", errs[0].Field)
		require.Equal(t, "postgresql Databases take no backups, so restore none", errs[0].Detail)
	})

	t.Run("immutable", func(t *testing.T) {
		stored := restoring(&example.DatabaseRestore{Database: "ledger", PointInTime: at}, true)
		for name, restore := range map[string]*example.DatabaseRestore{
			"another source":                   {Database: "orders", PointInTime: at},
			"another time":                     {Database: "ledger", PointInTime: "2026-12-05T04:59:31Z"},
			"the same time, written otherwise": {Database: "ledger", PointInTime: "2026-12-05T05:59:30+01:00"},
			"the time removed":                 {Database: "ledger"},
			"the restore unset":                nil,
		} {
			updated := restoring(restore, true)
			errs := validation.ValidateDatabaseUpdate(updated, stored)
			require.Len(t, errs, 1, name)
			require.Equal(t, field.ErrorTypeInvalid, errs[0].Type, name)
			require.Equal(t, "spec.restore", errs[0].Field, name)
			require.Contains(t, errs[0].Detail, "is immutable", name)
		}
		require.Empty(t, validation.ValidateDatabaseUpdate(restoring(&example.DatabaseRestore{Database: "ledger", PointInTime: at}, true), stored))
		// A Database created without one may not take one on later.
		errs := validation.ValidateDatabaseUpdate(stored, exampleDatabaseWithBackup())
		require.Len(t, errs, 1)
		require.Equal(t, "spec.restore", errs[0].Field)
		require.Contains(t, errs[0].Detail, "(none)")
		// A restored Database may stop backing up: spec.backup is needed at creation only.
		withoutBackup := restoring(&example.DatabaseRestore{Database: "ledger", PointInTime: at}, false)
		require.Empty(t, validation.ValidateDatabaseUpdate(withoutBackup, stored))
	})

	t.Run("pointInTime", func(t *testing.T) {
		for _, good := range []string{"2026-12-05T04:59:30Z", "2026-12-05T05:59:30.25+01:00", "2026-12-05T04:59:30.123456789Z"} {
			require.Empty(t, validation.ValidateDatabase(restoring(&example.DatabaseRestore{Database: "ledger", PointInTime: good}, true)), good)
		}
		for _, bad := range []string{"2026-12-05", "2026-12-05T04:59:30", "2026-12-05 04:59:30Z", "yesterday", "10000-01-01T00:00:00Z", strings.Repeat("9", 65)} {
			errs := validation.ValidateDatabase(restoring(&example.DatabaseRestore{Database: "ledger", PointInTime: bad}, true))
			require.Len(t, errs, 1, bad)
			require.Equal(t, "spec.restore.pointInTime", errs[0].Field, bad)
		}
	})
}

func exampleDatabaseWithBackup() *example.Database {
	db := exampleDatabase()
	db.Spec.Backup = exampleBackup()
	return db
}
