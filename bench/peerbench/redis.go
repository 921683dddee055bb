package peerbench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/internal/benchkit"

	"github.com/redis/go-redis/v9"
)

// Redis is a session log on Redis Streams: a stream per session whose entry ids are the
// session's sequences (seq-0), a hash of idempotency keys to sequences, a counter. A Lua
// script appends a batch atomically (Redis runs a script alone): each event whose key the
// hash has is a duplicate, each other takes the next sequence (gap-free). The server runs
// with appendonly yes and appendfsync always: it writes and fsyncs the append-only file
// before it answers. Followers block in XREAD on their own connection.
type Redis struct {
	dir  string
	proc *benchkit.Proc
	rdb  *redis.Client
}

// redisAppend is the append script. KEYS: the stream, the key hash, the counter; ARGV: key,
// data, key, data, …. It returns each event's sequence, negated for a duplicate.
var redisAppend = redis.NewScript(`
local out = {}
for i = 1, #ARGV, 2 do
	local seq = redis.call('HGET', KEYS[2], ARGV[i])
	if seq then
		out[#out + 1] = -tonumber(seq)
	else
		seq = redis.call('INCR', KEYS[3])
		redis.call('XADD', KEYS[1], seq .. '-0', 'e', ARGV[i + 1])
		redis.call('HSET', KEYS[2], ARGV[i], seq)
		out[#out + 1] = seq
	end
end
return out
`)

// StartRedis starts redis-server on a free port with its files in a new temporary directory.
func StartRedis() (*Redis, error) {
	bin, err := benchkit.LookProgram("redis-server", "apt-get install redis-server")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "peerbench-redis-")
	if err != nil {
		return nil, err
	}
	// failDir is the way out until the server runs: r.Close (below) takes over after.
	failDir := func(err error) (*Redis, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := benchkit.FreePort()
	if err != nil {
		return failDir(err)
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
		"--maxclients", "1000")
	p, err := benchkit.StartProc("redis", dir, cmd)
	if err != nil {
		return failDir(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	if err := benchkit.WaitPort(addr, p, time.Minute); err != nil {
		p.Stop()
		return failDir(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 512, ReadTimeout: -1, MaxRetries: -1})
	r := &Redis{dir: dir, proc: p, rdb: rdb}
	ctx := context.Background()
	if v, err := rdb.ConfigGet(ctx, "appendfsync").Result(); err != nil || v["appendfsync"] != "always" {
		r.Close()
		return nil, fmt.Errorf("redis: appendfsync is %v (%v), want always", v, err)
	}
	return r, nil
}

// Name implements System.
func (r *Redis) Name() string { return "redis" }

// Servers implements System.
func (r *Redis) Servers() []*benchkit.Proc { return []*benchkit.Proc{r.proc} }

// Close implements System.
func (r *Redis) Close() error {
	r.rdb.Close()
	r.proc.Stop()
	return os.RemoveAll(r.dir)
}

// CreateSession implements System: nothing to create.
func (r *Redis) CreateSession(context.Context, string) error { return nil }

func redisKeys(sid string) []string {
	// One hash tag, so that the three keys would stay on one node of a cluster.
	return []string{"{" + sid + "}:log", "{" + sid + "}:keys", "{" + sid + "}:seq"}
}

// Append implements System.
func (r *Redis) Append(ctx context.Context, sid string, evs []benchkit.Event) (int, error) {
	args := make([]any, 0, 2*len(evs))
	for _, e := range evs {
		args = append(args, e.Key, e.Data)
	}
	res, err := redisAppend.Run(ctx, r.rdb, redisKeys(sid), args...).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("append to %s: %w", sid, err)
	}
	if len(res) != len(evs) {
		return 0, fmt.Errorf("append to %s: %d results for %d events", sid, len(res), len(evs))
	}
	dups := 0
	for _, s := range res {
		if s < 0 {
			dups++
		}
	}
	return dups, nil
}

// Read implements System: XRANGE in pages of 1,000 entries, every event decoded (DecodeEvent).
func (r *Redis) Read(ctx context.Context, sid string, n int) (int, error) {
	key := redisKeys(sid)[0]
	start := "-"
	read := 0
	var d Decoded
	for read < n {
		msgs, err := r.rdb.XRangeN(ctx, key, start, "+", 1000).Result()
		if err != nil {
			return read, fmt.Errorf("read %s: %w", sid, err)
		}
		if len(msgs) == 0 {
			return read, fmt.Errorf("read %s: %d events, want %d", sid, read, n)
		}
		for _, m := range msgs {
			data, _ := m.Values["e"].(string)
			if err := DecodeEvent([]byte(data), &d); err != nil {
				return read, fmt.Errorf("read %s: %w", sid, err)
			}
		}
		read += len(msgs)
		start = "(" + msgs[len(msgs)-1].ID
	}
	return read, nil
}

// Subscribe implements System: XREAD BLOCK from the stream's last entry.
func (r *Redis) Subscribe(ctx context.Context, sid string, deliver func([]byte)) (<-chan struct{}, error) {
	key := redisKeys(sid)[0]
	last := "0-0"
	msgs, err := r.rdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
	if err != nil {
		return nil, err
	}
	if len(msgs) > 0 {
		last = msgs[0].ID
	}
	ready := make(chan struct{})
	close(ready)
	go func() {
		for ctx.Err() == nil {
			res, err := r.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{key, last}, Block: time.Second, Count: 1000}).Result()
			if err != nil {
				if errors.Is(err, redis.Nil) {
					continue
				}
				return
			}
			for _, s := range res {
				for _, m := range s.Messages {
					last = m.ID
					if d, ok := m.Values["e"].(string); ok {
						deliver([]byte(d))
					}
				}
			}
		}
	}()
	return ready, nil
}
