package kubeclient

import (
	"fmt"
	"net/http"

	"k8s.io/client-go/kubernetes"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	certificatesv1 "k8s.io/client-go/kubernetes/typed/certificates/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// Clientset serves core/v1, authentication/v1, authorization/v1 and certificates/v1; the other methods of
// kubernetes.Interface are its embedded unserved value's, which panic.
type Clientset struct {
	unserved
	core  corev1.CoreV1Interface
	authn authenticationv1.AuthenticationV1Interface
	authz authorizationv1.AuthorizationV1Interface
	certs certificatesv1.CertificatesV1Interface
}

var _ kubernetes.Interface = (*Clientset)(nil)

// unserved is kubernetes.Interface with no value behind it: calling a group it does not override panics
// with a nil dereference, which New's callers never reach (see the package doc).
type unserved struct{ kubernetes.Interface }

// NewForConfig is the Clientset for c, its groups sharing one HTTP client (as client-go's does).
func NewForConfig(c *rest.Config) (*Clientset, error) {
	httpClient, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("kubeclient: %w", err)
	}
	return NewForConfigAndClient(c, httpClient)
}

// NewForConfigAndClient is the Clientset for c over httpClient.
func NewForConfigAndClient(c *rest.Config, httpClient *http.Client) (*Clientset, error) {
	cs := &Clientset{}
	var err error
	if cs.core, err = corev1.NewForConfigAndClient(c, httpClient); err != nil {
		return nil, err
	}
	if cs.authn, err = authenticationv1.NewForConfigAndClient(c, httpClient); err != nil {
		return nil, err
	}
	if cs.authz, err = authorizationv1.NewForConfigAndClient(c, httpClient); err != nil {
		return nil, err
	}
	if cs.certs, err = certificatesv1.NewForConfigAndClient(c, httpClient); err != nil {
		return nil, err
	}
	return cs, nil
}

// CoreV1 implements kubernetes.Interface.
func (c *Clientset) CoreV1() corev1.CoreV1Interface { return c.core }

// AuthenticationV1 implements kubernetes.Interface.
func (c *Clientset) AuthenticationV1() authenticationv1.AuthenticationV1Interface { return c.authn }

// AuthorizationV1 implements kubernetes.Interface.
func (c *Clientset) AuthorizationV1() authorizationv1.AuthorizationV1Interface { return c.authz }

// CertificatesV1 implements kubernetes.Interface.
func (c *Clientset) CertificatesV1() certificatesv1.CertificatesV1Interface { return c.certs }
