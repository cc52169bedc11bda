// Package fuzzer holds the randfill functions that make random but
// valid-shaped objects of every type install.Install registers, for the
// round-trip tests (k8s.io/apimachinery/pkg/api/apitesting/roundtrip).
package fuzzer

import (
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	scalescheme "k8s.io/client-go/scale/scheme"
	"sigs.k8s.io/randfill"

	"example.com/database-apiserver/pkg/apis/example"
	examplev1 "example.com/database-apiserver/pkg/apis/example/v1"
)

// Funcs returns the fuzzer functions of the example.com group (and of the
// internal autoscaling Scale its scale subresource serves), in the
// fuzzer.FuzzerFuncs shape. Specs are fuzzed as users write them (replicas
// and storage may be unset, as before defaulting); statuses as the
// controller writes them.
var Funcs = func(codecs runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		fuzzDatabaseSpec,
		fuzzDatabaseStatus,
		fuzzDatabaseRestartStatus,
		fuzzDatabaseSwitchoverStatus,
		fuzzScaleStatus,
	}
}

func fuzzDatabaseSpec(s *example.DatabaseSpec, c randfill.Continue) {
	s.Engine = example.SupportedEngines[c.Intn(len(example.SupportedEngines))]
	// A version as users write one: a major ("15"), a line ("8.4") or a release ("8.0.36").
	// Whether the engine's catalog has it is the DatabaseValidation admission plugin's
	// judgement, which neither the wire forms nor validation make.
	s.Version = strconv.Itoa(1 + c.Intn(30))
	if c.Bool() {
		s.Version += "." + strconv.Itoa(c.Intn(10))
	}
	if c.Bool() {
		s.Version += "." + strconv.Itoa(c.Intn(40))
	}

	s.Replicas = nil
	if c.Bool() {
		r := example.MinReplicas + c.Int31n(example.MaxReplicas-example.MinReplicas+1)
		s.Replicas = &r
	}
	s.Storage = ""
	if c.Bool() {
		s.Storage = fmt.Sprintf("%dGi", 1+c.Intn(4096))
	}
	// A Pod of some Database: the spec does not know its object's name.
	s.Primary = ""
	if c.Bool() {
		s.Primary = randomName(c) + "-" + strconv.Itoa(c.Intn(int(example.MaxReplicas)))
	}
	// Half the time a backup policy, on any engine: which engines take backups is the
	// engines' say (validation.EngineRules.Backups), which the wire forms do not make.
	s.Backup = nil
	if c.Bool() {
		s.Backup = &example.DatabaseBackupPolicy{}
		fuzzDatabaseBackupPolicy(s.Backup, c)
	}
	// Half of those restore another Database, half of those as of a time.
	s.Restore = nil
	if s.Backup != nil && c.Bool() {
		s.Restore = &example.DatabaseRestore{Database: randomName(c)}
		if c.Bool() {
			s.Restore.PointInTime = time.Unix(c.Int63n(1<<32), c.Int63n(1e9)).UTC().Format(time.RFC3339Nano)
		}
	}
}

// fuzzDatabaseBackupPolicy makes a spec.backup as users write one: the store's endpoint,
// bucket and Secret always, the schedule, retention, port, prefix and region half the time.
func fuzzDatabaseBackupPolicy(b *example.DatabaseBackupPolicy, c randfill.Continue) {
	*b = example.DatabaseBackupPolicy{S3: example.DatabaseBackupS3{
		Endpoint:   "https://" + randomName(c) + ".example.com",
		Bucket:     "b-" + randomName(c),
		SecretName: randomName(c),
	}}
	if c.Bool() {
		b.Schedule = fmt.Sprintf("%d %d * * *", c.Intn(60), c.Intn(24))
	}
	if c.Bool() {
		r := example.MinRetentionFullBackups + c.Int31n(example.MaxRetentionFullBackups-example.MinRetentionFullBackups+1)
		b.RetentionFullBackups = &r
	}
	if c.Bool() {
		b.S3.Endpoint += ":" + strconv.Itoa(1+c.Intn(65535))
	}
	if c.Bool() {
		b.S3.Prefix = "/" + randomName(c)
	}
	if c.Bool() {
		b.S3.Region = randomName(c)
	}
}

func fuzzDatabaseStatus(s *example.DatabaseStatus, c randfill.Continue) {
	phases := append([]example.DatabasePhase{""}, example.SupportedPhases...)
	s.Phase = phases[c.Intn(len(phases))]
	s.ReadyReplicas = c.Int31n(example.MaxReplicas + 1)
	s.ObservedGeneration = c.Int63n(1 << 20)

	s.Selector = ""
	if c.Bool() {
		s.Selector = "app.kubernetes.io/instance=" + randomName(c) + ",app.kubernetes.io/name=" + string(example.SupportedEngines[c.Intn(len(example.SupportedEngines))])
	}

	// One member per ordinal, as status.members is a map keyed by name, and
	// the primary one of them (or not yet known).
	s.Primary = ""
	s.Members = nil
	name := randomName(c)
	roles := append([]example.MemberRole{""}, example.SupportedMemberRoles...)
	for i := range c.Intn(int(example.MaxReplicas) + 1) {
		m := example.DatabaseMember{
			Name:      example.PodName(name, int32(i)),
			Role:      roles[c.Intn(len(roles))],
			Ready:     c.Bool(),
			Streaming: c.Bool(),
		}
		if c.Bool() {
			lag := c.Int63n(1 << 40)
			m.LagBytes = &lag
		}
		if c.Bool() {
			lag := c.Int63n(1 << 20)
			m.LagSeconds = &lag
		}
		s.Members = append(s.Members, m)
	}
	if len(s.Members) > 0 && c.Bool() {
		s.Primary = s.Members[c.Intn(len(s.Members))].Name
	}

	s.Restart = nil
	if c.Bool() {
		s.Restart = &example.DatabaseRestartStatus{}
		c.Fill(s.Restart)
	}
	s.Backup = nil
	if c.Bool() {
		s.Backup = &example.DatabaseBackupStatus{}
		fuzzDatabaseBackupStatus(s.Backup, c)
	}
	s.Switchover = nil
	if c.Bool() {
		s.Switchover = &example.DatabaseSwitchoverStatus{}
		c.Fill(s.Switchover)
		if len(s.Members) > 0 {
			s.Switchover.Target = s.Members[c.Intn(len(s.Members))].Name
		}
	}

	// At most one condition per type, as status.conditions is a map keyed by type.
	s.Conditions = nil
	statuses := []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}
	for _, typ := range []string{examplev1.ConditionReady, examplev1.ConditionProgressing, examplev1.ConditionDegraded} {
		if !c.Bool() {
			continue
		}
		s.Conditions = append(s.Conditions, metav1.Condition{
			Type:               typ,
			Status:             statuses[c.Intn(len(statuses))],
			ObservedGeneration: c.Int63n(1 << 20),
			// Whole seconds: metav1.Time serializes as RFC 3339 without fractions.
			LastTransitionTime: metav1.Unix(c.Int63n(1<<32), 0),
			Reason:             "Reason" + strconv.Itoa(c.Intn(100)),
			Message:            c.String(0),
		})
	}
}

// fuzzDatabaseRestartStatus makes a request as databases/restart records it
// (a user name, a time in whole microseconds, the form metav1.MicroTime
// serializes) and, half the time, the controller's completion in whole seconds.
func fuzzDatabaseRestartStatus(s *example.DatabaseRestartStatus, c randfill.Continue) {
	s.RequestedBy = "user-" + randomName(c)
	s.RequestedAt = metav1.NewMicroTime(time.UnixMicro(c.Int63n(1 << 52)))
	s.Reason = ""
	if c.Bool() {
		s.Reason = c.String(0)
	}
	s.CompletedAt = nil
	if c.Bool() {
		t := metav1.NewMicroTime(time.UnixMicro(c.Int63n(1 << 52)))
		s.CompletedAt = &t
	}
}

// fuzzDatabaseBackupStatus makes a status.backup as the controller writes it: Job names,
// and times in whole seconds (metav1.Time serializes as RFC 3339 without fractions), each
// half the time.
func fuzzDatabaseBackupStatus(s *example.DatabaseBackupStatus, c randfill.Continue) {
	job := func() string { return randomName(c) + "-backup-" + strconv.Itoa(c.Intn(1<<20)) }
	*s = example.DatabaseBackupStatus{}
	if c.Bool() {
		t := metav1.Unix(c.Int63n(1<<32), 0)
		s.LastScheduleTime = &t
	}
	if c.Bool() {
		s.ActiveJob = job()
	}
	if c.Bool() {
		t := metav1.Unix(c.Int63n(1<<32), 0)
		s.LastSuccessfulTime, s.LastSuccessfulJob = &t, job()
	}
	if c.Bool() {
		t := metav1.Unix(c.Int63n(1<<32), 0)
		s.LastFailureTime, s.LastFailedJob = &t, job()
	}
}

// fuzzDatabaseSwitchoverStatus makes a request as databases/switchover
// records it: a user name, a time in whole seconds and a Pod name.
func fuzzDatabaseSwitchoverStatus(s *example.DatabaseSwitchoverStatus, c randfill.Continue) {
	s.RequestedBy = "user-" + randomName(c)
	s.RequestedAt = metav1.Unix(c.Int63n(1<<32), 0)
	s.Target = example.PodName(randomName(c), c.Int31n(example.MaxReplicas))
}

// fuzzScaleStatus keeps the selector to what survives autoscaling/v1's
// string form: nil, or at least one label with a valid key and value.
func fuzzScaleStatus(s *scalescheme.ScaleStatus, c randfill.Continue) {
	s.Replicas = c.Int31n(example.MaxReplicas + 1)
	s.Selector = nil
	if c.Bool() {
		s.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{
			"app.kubernetes.io/instance": randomName(c),
		}}
	}
}

// randomName returns a DNS-1035 label of 1 to 20 characters.
func randomName(c randfill.Continue) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	const tail = letters + "0123456789"
	b := []byte{letters[c.Intn(len(letters))]}
	for n := c.Intn(20); n > 0; n-- {
		b = append(b, tail[c.Intn(len(tail))])
	}
	return string(b)
}
