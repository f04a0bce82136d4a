package bloomguard

// The Go client against a real daemon's published filter.
// tests/goclient.test starts the daemon and sets, for these tests:
//
//	BLOOMGUARD_TEST_FILTER     the published file (<publish_dir>/default.bgf)
//	BLOOMGUARD_TEST_URL        the daemon (http://127.0.0.1:PORT)
//	BLOOMGUARD_TEST_PID        its process id (SIGSTOP makes it stale, SIGTERM withdraws)
//	BLOOMGUARD_TEST_ROWS       the table holds the text ids 1..ROWS
//	BLOOMGUARD_TEST_STALENESS  its [sync] max_staleness, seconds
//
// The tests run in the order of this file; the last one stops the daemon.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type env struct {
	path  string
	url   string
	pid   int
	rows  int
	stale float64
}

func need(t testing.TB) env {
	e := env{path: os.Getenv("BLOOMGUARD_TEST_FILTER"), url: os.Getenv("BLOOMGUARD_TEST_URL")}
	if e.path == "" {
		t.Skip("BLOOMGUARD_TEST_FILTER is not set (tests/goclient.test sets it)")
	}
	e.pid, _ = strconv.Atoi(os.Getenv("BLOOMGUARD_TEST_PID"))
	e.rows, _ = strconv.Atoi(os.Getenv("BLOOMGUARD_TEST_ROWS"))
	e.stale, _ = strconv.ParseFloat(os.Getenv("BLOOMGUARD_TEST_STALENESS"), 64)
	return e
}

func open(t testing.TB, path string) *Filter {
	f, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// needOpen: the daemon's environment (need) and its published filter, open (open).
func needOpen(t testing.TB) (env, *Filter) {
	e := need(t)
	return e, open(t, e.path)
}

func post(t testing.TB, e env, path string, body any) (int, []byte) {
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	r, err := http.Post(e.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var out bytes.Buffer
	out.ReadFrom(r.Body)
	return r.StatusCode, out.Bytes()
}

// daemonExists: the daemon's answers (POST /exists) for ids, in order.
func daemonExists(t *testing.T, e env, ids []string) []bool {
	var all []bool
	for i := 0; i < len(ids); i += 1000 {
		j := i + 1000
		if j > len(ids) {
			j = len(ids)
		}
		code, body := post(t, e, "/exists", map[string][]string{"ids": ids[i:j]})
		var got struct{ Exists []bool }
		if code != 200 || json.Unmarshal(body, &got) != nil {
			t.Fatalf("POST /exists: %d %s", code, body)
		}
		all = append(all, got.Exists...)
	}
	return all
}

// signal sends sig to the daemon, failing the test when it cannot.
func signal(t *testing.T, e env, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(e.pid, sig); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %v", what, d)
		}
	}
}

// absentIDs: n ids the filter surely rejects now (false positives left out).
func absentIDs(f *Filter, prefix string, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if f.LookupString(id) == Absent {
			out = append(out, id)
		}
	}
	return out
}

func TestInfo(t *testing.T) {
	e, f := needOpen(t)
	in := f.Info()
	if in.Code != OK || in.Name != "default" || in.Spelling != "text" || in.Generation < 1 ||
		in.Layers < 1 || in.MaxStaleness != e.stale || int(in.PID) != e.pid || in.Degraded ||
		in.Saturated || in.HorizonAge < 0 {
		t.Fatalf("info: %+v", in)
	}
	if v := Version(); len(v) < 5 {
		t.Fatalf("version %q", v)
	}
}

func TestAgreesWithTheDaemon(t *testing.T) {
	e, f := needOpen(t)
	var ids []string
	for _, i := range rand.Perm(e.rows)[:2000] {
		ids = append(ids, strconv.Itoa(i+1))
	}
	for i := 0; i < 3000; i++ {
		ids = append(ids, fmt.Sprintf("go-%d", i))
	}
	ids = append(ids, "a b", "x/y", "\u00fc", "  7  ")
	theirs := daemonExists(t, e, ids)
	absent := 0
	for i, id := range ids {
		a := f.LookupString(id)
		if (a == Maybe) != theirs[i] {
			t.Errorf("%q: %v, POST /exists says %v", id, a, theirs[i])
		}
		if a != f.Lookup([]byte(id)) {
			t.Errorf("%q: Lookup and LookupString differ", id)
		}
		if i < 2000 && a != Maybe {
			t.Errorf("present id %q: %v", id, a)
		}
		if i >= 2000 && i < 5000 && a == Absent {
			absent++
		}
	}
	if absent < 2900 {
		t.Errorf("only %d of 3000 absent ids answered absent", absent)
	}
	if f.LookupString("") != f.Lookup(nil) || f.Lookup(nil) != f.Lookup([]byte{}) {
		t.Error("the empty id answers differently by its spelling")
	}
}

func TestAPostedIDIsMaybeAtOnce(t *testing.T) {
	e, f := needOpen(t)
	id := absentIDs(f, "go-posted", 1)[0]
	if code, body := post(t, e, "/ids", map[string][]string{"ids": {id}}); code != 200 {
		t.Fatalf("POST /ids: %d %s", code, body)
	}
	if a := f.LookupString(id); a != Maybe {
		t.Fatalf("right after POST /ids: %v", a)
	}
	if f.AbsentString(id) {
		t.Fatal("Absent says true")
	}
}

func TestGoroutinesShareOneFilter(t *testing.T) {
	e, f := needOpen(t)
	absent := absentIDs(f, "go-shared", 200)
	var wg sync.WaitGroup
	var mu sync.Mutex
	bad := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for r := 0; r < 50; r++ {
				for i := 1; i <= 500 && i <= e.rows; i++ {
					if f.LookupString(strconv.Itoa(i)) != Maybe {
						n++
					}
				}
				for _, id := range absent {
					if f.LookupString(id) != Absent {
						n++
					}
				}
			}
			mu.Lock()
			bad += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if bad != 0 {
		t.Fatalf("%d wrong answers", bad)
	}
}

func TestARebuildSupersedesTheFile(t *testing.T) {
	e, f := needOpen(t)
	probe := absentIDs(f, "go-rebuild", 1)[0]
	g0 := f.Info().Generation
	if code, body := post(t, e, "/reload", nil); code != 200 && code != 202 {
		t.Fatalf("POST /reload: %d %s", code, body)
	}
	wrong := 0
	waitFor(t, "the filter follows the rebuild to a new generation", 60*time.Second, func() bool {
		for i := 1; i <= 200 && i <= e.rows; i++ {
			if f.LookupString(strconv.Itoa(i)) != Maybe {
				wrong++
			}
		}
		return f.Info().Generation > g0
	})
	if wrong != 0 {
		t.Fatalf("%d lookups of present ids answered otherwise during the rebuild", wrong)
	}
	if a := f.LookupString(probe); a != Absent {
		t.Fatalf("an absent id in the new generation: %v", a)
	}
}

func TestAStoppedDaemonMakesItDegraded(t *testing.T) {
	e, f := needOpen(t)
	probe := absentIDs(f, "go-stop", 1)[0]
	signal(t, e, syscall.SIGSTOP)
	func() {
		defer syscall.Kill(e.pid, syscall.SIGCONT)
		time.Sleep(time.Duration((e.stale + 1) * float64(time.Second)))
		if a := f.LookupString(probe); a != Degraded {
			t.Errorf("an absent id after max_staleness: %v", a)
		}
		if f.AbsentString(probe) {
			t.Error("Absent says true while degraded")
		}
		if a := f.LookupString("1"); a != Maybe {
			t.Errorf("a present id: %v", a)
		}
		if in := f.Info(); !in.Degraded || in.HorizonAge <= e.stale {
			t.Errorf("info: %+v", in)
		}
	}()
	waitFor(t, "absent again after SIGCONT", 15*time.Second, func() bool { return f.LookupString(probe) == Absent })
}

func TestNoFile(t *testing.T) {
	e := need(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "not-yet.bgf")
	_, err := Open(missing, 0)
	var be *Error
	if !errors.As(err, &be) || be.Code != ENOENT || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a missing file: %v", err)
	}
	f, err := Open(missing, MissingOK)
	if err != nil {
		t.Fatal(err)
	}
	if a := f.LookupString("1"); a != NotReady || f.AbsentString("1") {
		t.Fatalf("lookup without a file: %v", a)
	}
	if in := f.Info(); in.Code != ENOENT {
		t.Fatalf("info without a file: %+v", in)
	}
	f.Close()
	if _, err := Open("relative/default.bgf", 0); !errors.As(err, &be) || be.Code != EINVAL {
		t.Fatalf("a relative path: %v", err)
	}
	junk := filepath.Join(dir, "junk.bgf")
	b := make([]byte, 8192)
	rand.Read(b)
	os.WriteFile(junk, b, 0o644)
	if _, err := Open(junk, MissingOK); !errors.As(err, &be) || be.Code != EFORMAT {
		t.Fatalf("a junk file: %v", err)
	}
	g, _ := Open(e.path, 0)
	g.Close()
	g.Close()
	if a := g.LookupString("1"); a != NotReady {
		t.Fatalf("after Close: %v", a)
	}
}

// Last: it stops the daemon.
func TestAnExitedDaemonWithdrawsIt(t *testing.T) {
	e, f := needOpen(t)
	probe := absentIDs(f, "go-exit", 1)[0]
	signal(t, e, syscall.SIGTERM)
	waitFor(t, "the file is withdrawn", 15*time.Second, func() bool {
		_, err := os.Stat(e.path)
		return errors.Is(err, fs.ErrNotExist)
	})
	if a := f.LookupString(probe); a != NotReady {
		t.Fatalf("after the daemon exited: %v", a)
	}
	if in := f.Info(); in.Code == OK {
		t.Fatalf("info after the daemon exited: %+v", in)
	}
}

// BenchmarkLookup: ns per LookupString over present and absent ids, or
// over the lines of $BLOOMGUARD_BENCH_IDS (bench/clients gives the C
// library's client and the Python one the same file).
func BenchmarkLookup(b *testing.B) {
	e := need(b)
	f := open(b, e.path)
	var ids []string
	if file := os.Getenv("BLOOMGUARD_BENCH_IDS"); file != "" {
		text, err := os.ReadFile(file)
		if err != nil {
			b.Fatal(err)
		}
		ids = strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
	} else {
		for i := 0; i < 2000; i++ {
			if i%2 == 0 {
				ids = append(ids, strconv.Itoa(i%e.rows+1))
			} else {
				ids = append(ids, fmt.Sprintf("bench-absent-%d", i))
			}
		}
	}
	b.ResetTimer()
	n := 0
	for i := 0; i < b.N; i++ {
		if f.LookupString(ids[i%len(ids)]) == Absent {
			n++
		}
	}
	if n < 0 {
		b.Fatal(n)
	}
}
