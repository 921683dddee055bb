package peerbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/sessiond/sessiond/internal/benchkit"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsServerVersion is the nats-server the benchmark builds from the Go module proxy (Debian's
// is too old to accept sync_interval: always).
const natsServerVersion = "v2.15.2"

// NATS is a session log on NATS JetStream: one file-backed stream for every session, a subject
// per session (s.<session>); each event is published with its idempotency key as the message
// id (Nats-Msg-Id), which the server deduplicates within the stream's duplicate window (set to
// an hour here: longer than any run). The server runs with sync_interval: always, so it
// fsyncs each write before it acknowledges it. A batch is published asynchronously and its
// acknowledgements awaited (JetStream's atomic batches need another client library; this one
// is not atomic). Followers are ordered consumers delivering new messages of the subject.
type NATS struct {
	dir  string
	proc *benchkit.Proc
	nc   *nats.Conn
	js   jetstream.JetStream
	url  string
}

const natsStream = "SESSIONS"

var natsBuild struct {
	once sync.Once
	path string
	err  error
}

// natsServer returns a nats-server that takes sync_interval: always: $PEERBENCH_NATS_SERVER
// when set, else natsServerVersion built once with go install into the user's cache
// directory (a minute or two the first time).
func natsServer() (string, error) {
	if p := os.Getenv("PEERBENCH_NATS_SERVER"); p != "" {
		return p, nil
	}
	natsBuild.once.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			natsBuild.err = err
			return
		}
		dir := filepath.Join(cache, "sessiond-peerbench", "nats-server-"+natsServerVersion)
		natsBuild.path = filepath.Join(dir, "nats-server")
		if _, err := os.Stat(natsBuild.path); err == nil {
			return
		}
		cmd := exec.Command("go", "install", "github.com/nats-io/nats-server/v2@"+natsServerVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+dir)
		cmd.Dir = os.TempDir() // outside this module
		if out, err := cmd.CombinedOutput(); err != nil {
			natsBuild.err = fmt.Errorf("%w: go install nats-server %s: %v\n%s", benchkit.ErrMissing, natsServerVersion, err, out)
		}
	})
	return natsBuild.path, natsBuild.err
}

// StartNATS starts nats-server with JetStream (sync_interval: always) on a free port with its
// store in a new temporary directory, and creates the stream.
func StartNATS() (*NATS, error) {
	bin, err := natsServer()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "peerbench-nats-")
	if err != nil {
		return nil, err
	}
	// failDir is the way out until the server runs: n.Close (below) takes over after.
	failDir := func(err error) (*NATS, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := benchkit.FreePort()
	if err != nil {
		return failDir(err)
	}
	conf := fmt.Sprintf("listen: 127.0.0.1:%d\nmax_payload: 8MB\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", port, filepath.Join(dir, "js"))
	confPath := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return failDir(err)
	}
	p, err := benchkit.StartProc("nats", dir, exec.Command(bin, "-c", confPath))
	if err != nil {
		return failDir(err)
	}
	n := &NATS{dir: dir, proc: p, url: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	fail := func(err error) (*NATS, error) {
		n.Close()
		return nil, err
	}
	if err := benchkit.WaitPort("127.0.0.1:"+strconv.Itoa(port), p, time.Minute); err != nil {
		return fail(err)
	}
	if n.nc, err = nats.Connect(n.url); err != nil {
		return fail(fmt.Errorf("connect to nats: %w", err))
	}
	if n.js, err = jetstream.New(n.nc, jetstream.WithPublishAsyncMaxPending(4096)); err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := n.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: natsStream, Subjects: []string{"s.>"}, Storage: jetstream.FileStorage,
		Duplicates: time.Hour,
	}); err != nil {
		return fail(fmt.Errorf("create the stream: %w", err))
	}
	return n, nil
}

// Name implements System.
func (n *NATS) Name() string { return "nats" }

// Servers implements System.
func (n *NATS) Servers() []*benchkit.Proc { return []*benchkit.Proc{n.proc} }

// Close implements System.
func (n *NATS) Close() error {
	if n.nc != nil {
		n.nc.Close()
	}
	n.proc.Stop()
	return os.RemoveAll(n.dir)
}

// CreateSession implements System: the stream holds every session.
func (n *NATS) CreateSession(context.Context, string) error { return nil }

func subject(sid string) string { return "s." + sid }

// Append implements System.
func (n *NATS) Append(ctx context.Context, sid string, evs []benchkit.Event) (int, error) {
	subj := subject(sid)
	if len(evs) == 1 {
		ack, err := n.js.Publish(ctx, subj, evs[0].Data, jetstream.WithMsgID(evs[0].Key))
		if err != nil {
			return 0, fmt.Errorf("publish to %s: %w", subj, err)
		}
		if ack.Duplicate {
			return 1, nil
		}
		return 0, nil
	}
	futs := make([]jetstream.PubAckFuture, len(evs))
	for i, e := range evs {
		f, err := n.js.PublishAsync(subj, e.Data, jetstream.WithMsgID(e.Key))
		if err != nil {
			return 0, fmt.Errorf("publish to %s: %w", subj, err)
		}
		futs[i] = f
	}
	dups := 0
	for _, f := range futs {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				dups++
			}
		case err := <-f.Err():
			return 0, fmt.Errorf("publish to %s: %w", subj, err)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return dups, nil
}

// Read implements System: an ordered consumer of the session's subject from its first
// message, fetching 1,000 at a time, every event decoded (DecodeEvent).
func (n *NATS) Read(ctx context.Context, sid string, want int) (int, error) {
	c, err := n.js.OrderedConsumer(ctx, natsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject(sid)}, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", sid, err)
	}
	read := 0
	var d Decoded
	for read < want {
		batch, err := c.Fetch(min(1000, want-read), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return read, fmt.Errorf("read %s: %w", sid, err)
		}
		got := 0
		var derr error
		for m := range batch.Messages() {
			if err := DecodeEvent(m.Data(), &d); err != nil && derr == nil {
				derr = err
			}
			got++
		}
		if derr != nil {
			return read, fmt.Errorf("read %s: %w", sid, derr)
		}
		if err := batch.Error(); err != nil {
			return read, fmt.Errorf("read %s: %w", sid, err)
		}
		if got == 0 {
			return read, fmt.Errorf("read %s: %d events, want %d", sid, read, want)
		}
		read += got
	}
	return read, nil
}

// Subscribe implements System: an ordered consumer of the session's new messages.
func (n *NATS) Subscribe(ctx context.Context, sid string, deliver func([]byte)) (<-chan struct{}, error) {
	c, err := n.js.OrderedConsumer(ctx, natsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject(sid)}, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, err
	}
	cc, err := c.Consume(func(m jetstream.Msg) { deliver(m.Data()) })
	if err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		cc.Stop()
	}()
	ready := make(chan struct{})
	close(ready)
	return ready, nil
}
