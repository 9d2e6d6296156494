package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/features"
	flagzv1alpha1 "k8s.io/apiserver/pkg/server/flagz/api/v1alpha1"
	flagzv1beta1 "k8s.io/apiserver/pkg/server/flagz/api/v1beta1"
	statuszv1alpha1 "k8s.io/apiserver/pkg/server/statusz/api/v1alpha1"
	statuszv1beta1 "k8s.io/apiserver/pkg/server/statusz/api/v1beta1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// The zpages (/flagz, /statusz) answer as the apiserver library's handlers the kubelet installs: text/plain
// without an Accept header or when asked for it, the Flagz and Statusz kinds (config.k8s.io v1beta1, and the
// deprecated v1alpha1 with a Warning header) as JSON, YAML or — with the CBORServingAndStorage gate — CBOR
// when asked for one with `;as=<Kind>;v=<version>;g=config.k8s.io`, and 406 with a Status otherwise. They are
// built here on that library's API types and media type negotiation rather than on its handlers, whose
// response writers bring the API server's admission and CEL packages into the binary (about 12 MiB of the
// agent's resident memory).

// zpageHeader is the first lines of a zpage's text form, component-base's.
const zpageHeader = `
%s %s
Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.
`

// zpageDelimiters are the separators a text zpage puts between a name and its value, one picked at random
// per rendering so that nobody parses the text.
var zpageDelimiters = []string{":", ": ", "=", " "}

// nonDebuggingPaths are the top-level paths /statusz never lists.
var nonDebuggingPaths = map[string]bool{"/apis": true, "/api": true, "/openid": true, "/openapi": true, "/.well-known": true}

// zpage is one zpage endpoint: its text form and its structured kinds by group, version and kind.
type zpage struct {
	name       string // flagz or statusz: the endpoint, the Warning header's wording
	text       func() []byte
	structured map[schema.GroupVersionKind]func() runtime.Object
	codecs     *zpageCodecs
}

// zpageCodecs is the negotiated serializer of the zpages: text/plain plus JSON, YAML (and CBOR) of a scheme
// that holds the zpage kinds, protobuf left out.
type zpageCodecs struct {
	serializer.CodecFactory
	types []runtime.SerializerInfo
}

// SupportedMediaTypes implements runtime.NegotiatedSerializer.
func (c *zpageCodecs) SupportedMediaTypes() []runtime.SerializerInfo { return c.types }

// newZpageCodecs builds the zpages' serializers.
func newZpageCodecs() *zpageCodecs {
	scheme := runtime.NewScheme()
	utilruntime.Must(flagzv1alpha1.AddToScheme(scheme))
	utilruntime.Must(flagzv1beta1.AddToScheme(scheme))
	utilruntime.Must(statuszv1alpha1.AddToScheme(scheme))
	utilruntime.Must(statuszv1beta1.AddToScheme(scheme))
	var opts []serializer.CodecFactoryOptionsMutator
	if utilfeature.DefaultFeatureGate.Enabled(features.CBORServingAndStorage) {
		opts = append(opts, serializer.WithSerializer(cbor.NewSerializerInfo))
	}
	f := serializer.NewCodecFactory(scheme, opts...)
	c := &zpageCodecs{CodecFactory: f}
	for _, info := range f.SupportedMediaTypes() {
		switch info.MediaType {
		case runtime.ContentTypeJSON, runtime.ContentTypeYAML, runtime.ContentTypeCBOR:
			c.types = append(c.types, info)
		}
	}
	// text/plain is matched by name only: the handler renders it, so no serializer stands behind it.
	c.types = append(c.types, runtime.SerializerInfo{MediaType: "text/plain", MediaTypeType: "text", MediaTypeSubType: "plain", EncodesAsText: true})
	return c
}

// zpageRestrictions lets a request ask for text/plain as is, or for one of the zpage's kinds.
type zpageRestrictions map[schema.GroupVersionKind]func() runtime.Object

// AllowsMediaTypeTransform implements negotiation.EndpointRestrictions.
func (k zpageRestrictions) AllowsMediaTypeTransform(mimeType, mimeSubType string, gvk *schema.GroupVersionKind) bool {
	if mimeType == "text" && mimeSubType == "plain" {
		return gvk == nil
	}
	return gvk != nil && k[*gvk] != nil
}

// AllowsServerVersion implements negotiation.EndpointRestrictions.
func (zpageRestrictions) AllowsServerVersion(string) bool { return false }

// AllowsStreamSchema implements negotiation.EndpointRestrictions.
func (zpageRestrictions) AllowsStreamSchema(string) bool { return false }

// ServeHTTP answers a zpage request in the media type it negotiates.
func (z *zpage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.TrimSpace(r.Header.Get("Accept")) == "" {
		z.writeText(w)
		return
	}
	restrictions := zpageRestrictions(z.structured)
	mediaType, info, err := negotiation.NegotiateOutputMediaType(r, z.codecs, restrictions)
	if err != nil {
		writeStatusError(w, err)
		return
	}
	if info.MediaType == "text/plain" {
		z.writeText(w)
		return
	}
	if mediaType.Convert == nil || restrictions[*mediaType.Convert] == nil {
		writeStatusError(w, fmt.Errorf("content negotiation failed: no %s kind for %s", z.name, info.MediaType))
		return
	}
	gvk := *mediaType.Convert
	if gvk.Version == "v1alpha1" {
		w.Header().Set("Warning", fmt.Sprintf(`299 - "This version of the %s endpoint is deprecated. Please use a newer version."`, z.name))
	}
	ser := info.Serializer
	if mediaType.Pretty && info.PrettySerializer != nil {
		ser = info.PrettySerializer
	}
	var enc runtime.Encoder = ser
	if info.MediaType == runtime.ContentTypeCBOR {
		enc = runtime.UseNondeterministicEncoding(ser)
	}
	var buf bytes.Buffer
	if err := z.codecs.EncoderForVersion(enc, gvk.GroupVersion()).Encode(restrictions[gvk](), &buf); err != nil {
		writeStatusError(w, err)
		return
	}
	// The content type names the kind served, as the API server's response writers do.
	w.Header().Set("Content-Type", info.MediaType+";g="+gvk.Group+";v="+gvk.Version+";as="+gvk.Kind)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(buf.Bytes())
}

func (z *zpage) writeText(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(z.text())
}

// writeStatusError answers with err as a Status object in JSON: its code when it carries one (406 for a
// media type the zpage cannot give), else 500.
func writeStatusError(w http.ResponseWriter, err error) {
	status := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error()}
	if s, ok := err.(interface{ Status() metav1.Status }); ok {
		status = s.Status()
	}
	status.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	body, _ := json.Marshal(status)
	w.Header().Set("Content-Type", runtime.ContentTypeJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(status.Code))
	_, _ = w.Write(body)
}

// newFlagz is /flagz of component over flags: its text is rendered once (flags do not change) and kept.
func newFlagz(component string, flags FlagReader, codecs *zpageCodecs) *zpage {
	var once sync.Once
	var text []byte
	meta := metav1.ObjectMeta{Name: component}
	return &zpage{name: "flagz", codecs: codecs,
		text: func() []byte {
			once.Do(func() { text = flagzText(component, flags.GetFlagz()) })
			return text
		},
		structured: map[schema.GroupVersionKind]func() runtime.Object{
			flagzv1alpha1.SchemeGroupVersion.WithKind("Flagz"): func() runtime.Object {
				return &flagzv1alpha1.Flagz{TypeMeta: typeMeta(flagzv1alpha1.SchemeGroupVersion, "Flagz"), ObjectMeta: meta, Flags: flags.GetFlagz()}
			},
			flagzv1beta1.SchemeGroupVersion.WithKind("Flagz"): func() runtime.Object {
				return &flagzv1beta1.Flagz{TypeMeta: typeMeta(flagzv1beta1.SchemeGroupVersion, "Flagz"), ObjectMeta: meta, Flags: flags.GetFlagz()}
			},
		}}
}

// flagzText is the text /flagz: the header, then name, delimiter, value per flag in name order.
func flagzText(component string, flags map[string]string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, zpageHeader, component, "flagz")
	delim := zpageDelimiters[rand.IntN(len(zpageDelimiters))]
	names := make([]string, 0, len(flags))
	for name := range flags {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(&b, "%s%s%s\n", name, delim, flags[name])
	}
	return b.Bytes()
}

// statuszInfo is what /statusz reports.
type statuszInfo struct {
	start                    time.Time
	now                      func() time.Time
	goVersion                string
	binaryVersion, emulation string
	paths                    []string // listed paths, their first segments shown
}

// newStatusz is /statusz of component.
func newStatusz(component string, info statuszInfo, codecs *zpageCodecs) *zpage {
	meta := metav1.ObjectMeta{Name: component}
	paths := topLevelPaths(info.paths)
	uptime := func() int64 { return max(0, int64(info.now().Sub(info.start).Seconds())) }
	return &zpage{name: "statusz", codecs: codecs,
		text: func() []byte { return statuszText(component, info, paths, uptime()) },
		structured: map[schema.GroupVersionKind]func() runtime.Object{
			statuszv1alpha1.SchemeGroupVersion.WithKind("Statusz"): func() runtime.Object {
				return &statuszv1alpha1.Statusz{TypeMeta: typeMeta(statuszv1alpha1.SchemeGroupVersion, "Statusz"), ObjectMeta: meta,
					StartTime: metav1.NewTime(info.start), UptimeSeconds: uptime(), GoVersion: info.goVersion,
					BinaryVersion: info.binaryVersion, EmulationVersion: info.emulation, Paths: paths}
			},
			statuszv1beta1.SchemeGroupVersion.WithKind("Statusz"): func() runtime.Object {
				return &statuszv1beta1.Statusz{TypeMeta: typeMeta(statuszv1beta1.SchemeGroupVersion, "Statusz"), ObjectMeta: meta,
					StartTime: metav1.NewTime(info.start), UptimeSeconds: uptime(), GoVersion: info.goVersion,
					BinaryVersion: info.binaryVersion, EmulationVersion: info.emulation, Paths: paths}
			},
		}}
}

// statuszText is the text /statusz: start time, uptime, Go, binary and emulation versions, listed paths.
func statuszText(component string, info statuszInfo, paths []string, uptime int64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, zpageHeader, component, "statusz")
	delim := html.EscapeString(zpageDelimiters[rand.IntN(len(zpageDelimiters))])
	var emulation, listed string
	if info.emulation != "" {
		emulation = fmt.Sprintf("Emulation version%s %s", delim, html.EscapeString(info.emulation))
	}
	if len(paths) > 0 {
		listed = fmt.Sprintf("Paths%s %s", delim, html.EscapeString(strings.Join(paths, " ")))
	}
	fmt.Fprintf(&b, "\nStarted%[1]s %[2]s\nUp%[1]s %[3]s\nGo version%[1]s %[4]s\nBinary version%[1]s %[5]s\n%[6]s\n%[7]s\n",
		delim, html.EscapeString(info.start.Format(time.UnixDate)),
		fmt.Sprintf("%d hr %02d min %02d sec", uptime/3600, (uptime/60)%60, uptime%60),
		html.EscapeString(info.goVersion), html.EscapeString(info.binaryVersion), emulation, listed)
	return b.Bytes()
}

// topLevelPaths is the sorted first segments of paths, without the API server's non-debugging ones.
func topLevelPaths(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		parts := strings.Split(p, "/")
		if len(parts) < 2 || parts[1] == "" {
			continue
		}
		top := "/" + parts[1]
		if !seen[top] && !nonDebuggingPaths[top] {
			seen[top] = true
			out = append(out, top)
		}
	}
	sort.Strings(out)
	return out
}

func typeMeta(gv schema.GroupVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{Kind: kind, APIVersion: gv.String()}
}
