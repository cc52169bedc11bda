package myclient

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

const (
	uuidA = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
	uuidB = "4a2b7c9e-71ca-11e1-9e33-c80aa9429562"
)

func TestParseGTIDSetMergesIntervalsAndTags(t *testing.T) {
	set, err := ParseGTIDSet(uuidA + ":1-5:7:6,\n" + uuidB + ":1-3:blue:1-2")
	require.NoError(t, err)
	require.Equal(t, GTIDSet{
		uuidA:           {{1, 7}},
		uuidB:           {{1, 3}},
		uuidB + ":blue": {{1, 2}},
	}, set)
	require.Equal(t, uint64(12), set.Count())

	empty, err := ParseGTIDSet("")
	require.NoError(t, err)
	require.Empty(t, empty)

	for _, bad := range []string{uuidA, uuidA + ":x-3", uuidA + ":9tag:1", uuidA + ":5-3", uuidA + ":1-y"} {
		_, err := ParseGTIDSet(bad)
		require.Error(t, err, bad)
	}
}

func TestGTIDSetContains(t *testing.T) {
	parse := func(s string) GTIDSet {
		set, err := ParseGTIDSet(s)
		require.NoError(t, err)
		return set
	}
	have := parse(uuidA + ":1-10:20-30," + uuidB + ":1-5")
	for s, want := range map[string]bool{
		"":                                       true,
		uuidA + ":1-10":                          true,
		uuidA + ":3:25-30," + uuidB + ":5":       true,
		uuidA + ":1-11":                          false, // past the first interval
		uuidA + ":15":                            false, // in the gap
		uuidB + ":6":                             false,
		uuidB + ":tag:1":                         false, // a tag is its own source
		"5a2b7c9e-71ca-11e1-9e33-c80aa9429562:1": false,
	} {
		require.Equal(t, want, have.Contains(parse(s)), s)
	}
}

func TestIsAuthenticationFailureIsError1045(t *testing.T) {
	require.True(t, IsAuthenticationFailure(fmt.Errorf("connect: %w", &driver.MySQLError{Number: 1045, Message: "Access denied"})))
	require.False(t, IsAuthenticationFailure(&driver.MySQLError{Number: 1064}))
	require.False(t, IsAuthenticationFailure(fmt.Errorf("connection refused")))
}

func TestConfigUsesTheServerTheTimeoutsAndPreferredTLS(t *testing.T) {
	cfg := config(Server{Host: "10.0.0.1", Port: 3306, User: "root", Password: "s3cret"})
	require.Equal(t, "tcp", cfg.Net)
	require.Equal(t, "10.0.0.1:3306", cfg.Addr)
	require.Equal(t, "root", cfg.User)
	require.Equal(t, "s3cret", cfg.Passwd)
	require.Equal(t, ConnectTimeout, cfg.Timeout)
	require.Equal(t, "preferred", cfg.TLSConfig)
	require.True(t, cfg.InterpolateParams)
	require.Equal(t, map[string]string{"time_zone": "'+00:00'"}, cfg.Params, "TIMESTAMPDIFF in UTC, without daylight saving jumps")
}

func TestLagSecondsRoundsDownTheApplierBacklog(t *testing.T) {
	us := func(v int64) sql.NullInt64 { return sql.NullInt64{Int64: v, Valid: true} }
	none := sql.NullInt64{}
	seconds := func(v int64) *int64 { return &v }
	streaming := &Source{Receiving: "ON", Applying: "ON"}
	for _, c := range []struct {
		name              string
		src               *Source
		applying, applied sql.NullInt64
		caughtUp          bool
		want              *int64
	}{
		{"applying, rounded down", streaming, us(2_999_999), us(9_000_000), false, seconds(2)},
		{"applying under a second", streaming, us(999_999), none, false, seconds(0)},
		{"applying wins over caught up", streaming, us(4_000_000), us(1_000_000), true, seconds(4)},
		{"primary's clock ahead", streaming, us(-1_500_000), none, false, seconds(0)},
		{"idle and caught up", streaming, none, us(3_600_000_000), true, seconds(0)},
		{"idle, caught up, nothing applied since start", streaming, none, none, true, seconds(0)},
		{"caught up, receiver connecting", &Source{Receiving: "CONNECTING", Applying: "ON"}, none, us(5_000_000), true, nil},
		{"backlog between transactions", streaming, none, us(7_200_000), false, seconds(7)},
		{"backlog, receiver off", &Source{Receiving: "OFF", Applying: "ON"}, none, us(7_200_000), false, seconds(7)},
		{"backlog, nothing applied since start", streaming, none, none, false, nil},
		{"applier off", &Source{Receiving: "ON", Applying: "OFF"}, us(5_000_000), us(5_000_000), false, nil},
	} {
		require.Equal(t, c.want, lagSeconds(c.src, c.applying, c.applied, c.caughtUp), c.name)
	}
}

// A server that accepts the TCP connection and never sends its handshake is given up when
// the caller's context ends (the controller's per-pass deadline), not after IOTimeout: the
// context is cancelled once the client waits for the handshake (its goroutine is in the
// driver's readHandshakePacket), and Observe returns the context's error.
func TestObserveOfASilentServerEndsWithTheCallersContext(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := l.Addr().(*net.TCPAddr)
	done := make(chan error, 1)
	go func() {
		_, err := Client{}.Observe(ctx, Server{Host: "127.0.0.1", Port: int32(addr.Port), User: "root"}, "%", nil)
		done <- err
	}()
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*mysqlConn).readHandshakePacket")
	}, time.Minute, 10*time.Millisecond, "the client never waited for the server's handshake")
	cancelled := time.Now()
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		t.Logf("Observe returned %v after the cancellation: %v", time.Since(cancelled), err)
	case <-time.After(6 * IOTimeout):
		t.Fatalf("Observe did not return within %v of the cancellation", 6*IOTimeout)
	}
}

// The replication user's accounts are as set when its account of the host is there and no
// other, but the one of any host on a server that skips name resolution.
func TestAccountsAsSet(t *testing.T) {
	const host = "%.ns.svc.cluster.local"
	for _, tc := range []struct {
		hosts     []string
		skipNames bool
		want      bool
	}{
		{[]string{host}, false, true},
		{[]string{host}, true, true},
		{[]string{"%", host}, true, true},
		{[]string{"%", host}, false, false},
		{[]string{"%"}, true, false},
		{[]string{"%.other.svc.cluster.local", host}, true, false},
		{nil, false, false},
	} {
		require.Equal(t, tc.want, accountsAsSet(tc.hosts, host, tc.skipNames), "%q skip_name_resolve %v", tc.hosts, tc.skipNames)
	}
}

func TestNoChannelIsErrors1200And3074(t *testing.T) {
	require.True(t, noChannel(fmt.Errorf("start: %w", &driver.MySQLError{Number: 1200, Message: "The server is not configured as replica"})))
	require.True(t, noChannel(&driver.MySQLError{Number: 3074}))
	require.False(t, noChannel(&driver.MySQLError{Number: 1045}))
	require.False(t, noChannel(fmt.Errorf("connection refused")))
}
