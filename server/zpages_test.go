package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/server/flagz"
	"k8s.io/apiserver/pkg/server/statusz"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/utils/clock"
)

// zpageRequests are the Accept headers the zpages are compared on: none, text, each structured kind in
// each media type, a kind that does not exist, a media type they do not serve, and a list with a fallback.
var zpageRequests = []string{
	"",
	"text/plain",
	"application/json;v=v1beta1;g=config.k8s.io;as=%s",
	"application/json;v=v1alpha1;g=config.k8s.io;as=%s",
	"application/yaml;v=v1beta1;g=config.k8s.io;as=%s",
	"application/json;v=v1beta1;g=config.k8s.io;as=%s;pretty=1",
	"application/json;v=v9;g=config.k8s.io;as=%s",
	"application/json",
	"application/vnd.kubernetes.protobuf;v=v1beta1;g=config.k8s.io;as=%s",
	"application/json;v=v1;g=nope;as=%s, text/plain;q=0.5",
	"image/png",
}

// delimiters matches what the separators a text zpage picks at random are made of, so that two renderings
// compare equal once they are taken out.
var delimiters = regexp.MustCompile(`[:= ]+`)

// TestZpagesAnswerAsTheAPIServerLibrary compares nodelet's /flagz and /statusz with the apiserver library's
// handlers (those the kubelet installs) on the same flags and version, request by request: status, content
// type, Warning header and body (text with its random delimiter normalised, statusz without its uptime).
func TestZpagesAnswerAsTheAPIServerLibrary(t *testing.T) {
	const binary = "v1.37.1+nodelet"
	paths := append(statuszPaths[:len(statuszPaths):len(statuszPaths)], flagzPath)
	ours := http.NewServeMux()
	(&Server{opts: Options{Flagz: flags, KubeletVersion: binary, Clock: clock.RealClock{}}}).zpagesRoutes(ours)
	theirs := http.NewServeMux()
	flagz.Install(theirs, componentName, flags)
	v := basecompatibility.NewEffectiveVersion(version.MustParse(binary), false, version.MajorMinor(0, 0), version.MajorMinor(0, 0))
	statusz.Install(theirs, componentName, statusz.NewRegistry(v, statusz.WithListedPaths(paths)))
	for _, page := range []struct{ path, kind string }{{"/flagz", "Flagz"}, {"/statusz", "Statusz"}} {
		for _, accept := range zpageRequests {
			if strings.Contains(accept, "%s") {
				accept = strings.ReplaceAll(accept, "%s", page.kind)
			}
			got, want := serveZpage(t, ours, page.path, accept), serveZpage(t, theirs, page.path, accept)
			if got != want {
				t.Errorf("GET %s Accept %q:\n got %s\nwant %s", page.path, accept, got, want)
			}
		}
	}
}

// serveZpage is one zpage response, comparable: status, content type, warning and the normalised body.
func serveZpage(t *testing.T, mux *http.ServeMux, path, accept string) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	ct := rec.Header().Get("Content-Type")
	switch {
	case strings.HasPrefix(ct, "text/plain"):
		text = regexp.MustCompile(`(?m)^Up.*$`).ReplaceAllString(text, "Up")
		text = delimiters.ReplaceAllString(text, "|")
	case strings.HasPrefix(ct, "application/json") && rec.Code == http.StatusOK:
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatalf("GET %s %q: %v in %q", path, accept, err, body)
		}
		delete(obj, "uptimeSeconds")
		b, _ := json.Marshal(obj)
		text = string(b)
	case strings.HasPrefix(ct, "application/yaml"):
		text = regexp.MustCompile(`(?m)^uptimeSeconds: .*\n`).ReplaceAllString(text, "")
	case rec.Code != http.StatusOK:
		var status struct {
			Code    int    `json:"code"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal(body, &status)
		text = status.Reason + " " + status.Message
	}
	return strings.Join([]string{http.StatusText(rec.Code), ct, rec.Header().Get("Warning"), text}, " | ")
}
