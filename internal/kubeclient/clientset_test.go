package kubeclient

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestServedGroupsReachTheirPaths calls each served group through kubernetes.Interface, as the libraries
// that take one do, and checks the request each made.
func TestServedGroupsReachTheirPaths(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	cs, err := NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var kube kubernetes.Interface = cs
	ctx := context.Background()
	_, _ = kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	_, _ = kube.CoreV1().ServiceAccounts("ns").Get(ctx, "sa", metav1.GetOptions{})
	_, _ = kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{}, metav1.CreateOptions{})
	_, _ = kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{}, metav1.CreateOptions{})
	_, _ = kube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	_, _ = kube.CertificatesV1().PodCertificateRequests("ns").List(ctx, metav1.ListOptions{})
	want := []string{
		"GET /api/v1/namespaces/ns/serviceaccounts/sa",
		"GET /api/v1/nodes/n1",
		"GET /apis/certificates.k8s.io/v1/certificatesigningrequests",
		"GET /apis/certificates.k8s.io/v1/namespaces/ns/podcertificaterequests",
		"POST /apis/authentication.k8s.io/v1/tokenreviews",
		"POST /apis/authorization.k8s.io/v1/subjectaccessreviews",
	}
	sort.Strings(got)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestUnservedGroupPanics: a group the Clientset does not serve is a programming error, not a silent nil.
func TestUnservedGroupPanics(t *testing.T) {
	cs, err := NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("AppsV1 on the Clientset did not panic")
		}
	}()
	_ = cs.AppsV1()
}
