package failover

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The high-availability recipe of docs/deploy.md: its commands, exactly as the page shows them,
// are the ones the failover test runs (through sh, as the postgres user, with the variables
// set to the test's servers). TestRecipeIsTheDocs checks that the page shows these and no
// others.
const (
	recipeRole    = `psql -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -U postgres -c "CREATE ROLE replicator WITH REPLICATION LOGIN PASSWORD 'change-me'"`
	recipeBackup  = `pg_basebackup -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -U replicator -D "$STANDBY_DATA" -R -X stream -c fast`
	recipeSyncOn  = `psql -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -U postgres -c "ALTER SYSTEM SET synchronous_standby_names = '*'" -c "SELECT pg_reload_conf()"`
	recipeCheck   = `psql -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -U postgres -Atc "SELECT state, sync_state FROM pg_stat_replication"`
	recipePromote = `pg_ctl promote -w -D "$STANDBY_DATA"`
	recipeSyncOff = `psql -h "$PRIMARY_HOST" -p "$PRIMARY_PORT" -U postgres -c "ALTER SYSTEM SET synchronous_standby_names = ''" -c "SELECT pg_reload_conf()"`
)

// recipe is every command of the recipe, in the page's order.
var recipe = []string{recipeRole, recipeBackup, recipeSyncOn, recipeCheck, recipePromote, recipeSyncOff}

// recipeCheckWant is what recipeCheck prints once the standby is synchronous (the page's
// expectation).
const recipeCheckWant = "streaming|sync"

// haHeading starts the section of docs/deploy.md that holds the recipe.
const haHeading = "## High availability: a failover of the database"

// deployDoc returns docs/deploy.md.
func deployDoc(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// haSection returns the recipe's section of docs/deploy.md: from its heading to the next
// heading of its level.
func haSection(t *testing.T) string {
	t.Helper()
	doc := deployDoc(t)
	i := strings.Index(doc, "\n"+haHeading+"\n")
	if i < 0 {
		t.Fatalf("docs/deploy.md has no section %q", haHeading)
	}
	rest := doc[i+1+len(haHeading):]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// fences returns the blocks of section fenced as ```lang.
func fences(section, lang string) [][]string {
	var blocks [][]string
	var cur []string
	in, want := false, false
	for _, l := range strings.Split(section, "\n") {
		if strings.HasPrefix(l, "```") {
			if in {
				if want {
					blocks = append(blocks, cur)
				}
				in, cur = false, nil
				continue
			}
			in, want = true, strings.TrimSpace(l) == "```"+lang
			continue
		}
		if in && want {
			cur = append(cur, l)
		}
	}
	return blocks
}

// docCommands returns the commands of the section's ```sh blocks (a line in column 0 that does
// not start with '#', as docs_test.go of cmd/sessiond reads them) and the expectations
// ("# → TEXT") of each.
func docCommands(section string) (cmds []string, expect map[string][]string) {
	expect = map[string][]string{}
	for _, b := range fences(section, "sh") {
		for _, l := range b {
			switch {
			case strings.HasPrefix(l, "# → ") && len(cmds) > 0:
				last := cmds[len(cmds)-1]
				expect[last] = append(expect[last], strings.TrimPrefix(l, "# → "))
			case l == "" || strings.HasPrefix(l, "#"):
			case strings.HasPrefix(l, " ") || strings.HasPrefix(l, "\t"):
				cmds[len(cmds)-1] += "\n" + l
			default:
				cmds = append(cmds, l)
			}
		}
	}
	return cmds, expect
}

// replicationSettings returns the postgresql.conf lines of the recipe (its ```conf block),
// comments removed: what the test's primary runs with.
func replicationSettings(t *testing.T) []string {
	t.Helper()
	blocks := fences(haSection(t), "conf")
	if len(blocks) != 1 {
		t.Fatalf("docs/deploy.md, %q: %d ```conf blocks, want the one of the servers' settings", haHeading, len(blocks))
	}
	var out []string
	for _, l := range blocks[0] {
		if s, _, _ := strings.Cut(l, "#"); strings.TrimSpace(s) != "" {
			out = append(out, strings.TrimSpace(s))
		}
	}
	return out
}

// TestRecipeIsTheDocs: the commands of docs/deploy.md's recipe are the ones the failover test
// runs, in order, with the expectation the test checks.
func TestRecipeIsTheDocs(t *testing.T) {
	cmds, expect := docCommands(haSection(t))
	if !slices.Equal(cmds, recipe) {
		t.Fatalf("docs/deploy.md's recipe shows the commands\n%s\nthe failover test runs\n%s\nchange both together", strings.Join(cmds, "\n"), strings.Join(recipe, "\n"))
	}
	if !slices.Equal(expect[recipeCheck], []string{recipeCheckWant}) {
		t.Errorf("docs/deploy.md: the replication check expects %q, the test %q", expect[recipeCheck], recipeCheckWant)
	}
	if len(replicationSettings(t)) == 0 {
		t.Error("docs/deploy.md: the recipe's ```conf block sets nothing")
	}
}

// recipeRun runs one command of the recipe through sh as the postgres user, with vars set
// (PRIMARY_HOST, PRIMARY_PORT, STANDBY_DATA), and fails the test when it fails.
func (c *cluster) recipeRun(cmd string, vars ...string) string {
	c.t.Helper()
	if !slices.Contains(recipe, cmd) {
		c.t.Fatalf("not a command of the recipe: %s", cmd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sh := c.env.command(ctx, "/bin/sh", "-c", cmd)
	sh.Env = append(sh.Env, vars...)
	sh.Dir = c.dir
	out, err := sh.CombinedOutput()
	if err != nil {
		c.t.Fatalf("%s (%s): %v\n%s", cmd, strings.Join(vars, " "), err, out)
	}
	return string(out)
}
