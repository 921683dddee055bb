package main

import (
	"bytes"
	"context"
	"errors"
	"github.com/sessiond/sessiond/contract"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/client"
)

// TestResolveArchiveDir: --archive-dir means the same for serve, fsck and retention.
func TestResolveArchiveDir(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{"", filepath.Join("d", "archives")},
		{"-", ""},
		{"/x/arch", "/x/arch"},
		{"./-x", "./-x"},
	} {
		if got := resolveArchiveDir(tc.flag, "d"); got != tc.want {
			t.Errorf("--archive-dir %q: %q, want %q", tc.flag, got, tc.want)
		}
	}
}

// TestServeWithoutArchives: serve --archive-dir - turns the archives off, as it does for fsck,
// instead of creating a directory named "-": the archive endpoints answer 501 NOT_CONFIGURED
// (the code docs/api.md documents, which serve could not produce before), saying how to turn
// them on; a retention rule with it is refused.
func TestServeWithoutArchives(t *testing.T) {
	work := t.TempDir()
	data := filepath.Join(work, "data")
	var out, errOut bytes.Buffer
	if code := runServe([]string{"--data", data, "--archive-dir", "-", "--retention-archive-closed-after", "30d"}, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--retention-* rules need them") {
		t.Errorf("serve --archive-dir - with a retention rule: exit %d, %s", code, errOut.String())
	}
	url, _, _ := startServeIn(t, work, "--data", data, "--archive-dir", "-")
	cl := client.New(url, http.DefaultClient)
	resp, err := http.Post(url+"/v1/sessions", "application/json", strings.NewReader(`{"session_id":"S-na","agent_id":"a","role":"user","snapshot":{"mode":"chat","modelId":"m","capabilities":{}}}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %v %v", resp, err)
	}
	resp.Body.Close()
	_, err = cl.Archive(context.Background(), "S-na", api.ArchiveRequest{})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Code != contract.CodeNotConfigured || ae.Status != http.StatusNotImplemented || !strings.Contains(ae.Message, "--archive-dir DIR") {
		t.Errorf("archive on a server without archives: %v", err)
	}
	if _, err := os.Stat(filepath.Join(work, "-")); !os.IsNotExist(err) {
		t.Errorf("serve --archive-dir - created a directory named -: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "archives")); !os.IsNotExist(err) {
		t.Errorf("serve --archive-dir - created <data>/archives: %v", err)
	}
}
