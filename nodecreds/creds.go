package nodecreds

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/component-base/metrics/legacyregistry"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletcertificate "k8s.io/kubernetes/pkg/kubelet/certificate"
	"k8s.io/kubernetes/pkg/kubelet/certificate/bootstrap"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/internal/kubeclient"
)

// exitAfter: with rotation, the kubelet exits when it has had no valid client certificate for this long
// (its supervisor restarts it, to bootstrap again); nodelet keeps the kubelet's value.
const exitAfter = 5 * time.Minute

// ClientConfig returns the node's API client configuration when the kubelet's flags ask for TLS bootstrap
// or rotation, after bootstrapping if needed; nil (and no error) when a plain --kubeconfig is all there is
// (or in standalone mode), which the caller loads itself. The certificate manager and the transport's
// rotation run until ctx ends.
func ClientConfig(ctx context.Context, cfg *config.Config, log logr.Logger) (*rest.Config, error) {
	if cfg.Kubeconfig == "" {
		return nil, nil
	}
	nodeName := types.NodeName(cfg.NodeName)
	if cfg.BootstrapKubeconfig != "" {
		log.Info("Client rotation is on, will bootstrap in background", "kubeconfig", cfg.Kubeconfig,
			"bootstrapKubeconfig", cfg.BootstrapKubeconfig, "certDir", cfg.CertDirectory())
		if err := bootstrapClientCert(ctx, log, cfg.Kubeconfig, cfg.BootstrapKubeconfig, cfg.CertDirectory(), cfg.NodeName, time.Now()); err != nil {
			return nil, fmt.Errorf("TLS bootstrap: %w", err)
		}
	}
	if !cfg.Kubelet.RotateCertificates {
		return nil, nil
	}
	certConfig, clientConfig, err := bootstrap.LoadClientConfig(log, cfg.Kubeconfig, cfg.BootstrapKubeconfig, cfg.CertDirectory())
	if err != nil {
		return nil, err
	}
	newClientset := func(current *tls.Certificate) (clientset.Interface, error) {
		// With a valid certificate, CSRs are made as the node; until then with the bootstrap credentials.
		c := certConfig
		if current != nil {
			c = clientConfig
		}
		return kubeclient.NewForConfig(c)
	}
	mgr, err := kubeletcertificate.NewKubeletClientCertificateManager(cfg.CertDirectory(), nodeName,
		// kubeadm hands the kubelet a certificate in --kubeconfig and expects it rotated out at once.
		clientConfig.CertData, clientConfig.KeyData, clientConfig.CertFile, clientConfig.KeyFile, newClientset)
	if err != nil {
		return nil, fmt.Errorf("client certificate manager: %w", err)
	}
	registerClientTTL(mgr, log)
	mgr.Start()
	go func() {
		<-ctx.Done()
		mgr.Stop()
	}()
	transport := rest.AnonymousClientConfig(clientConfig)
	if _, err := kubeletcertificate.UpdateTransport(log, ctx.Done(), transport, mgr, exitAfter); err != nil {
		return nil, fmt.Errorf("client certificate rotation: %w", err)
	}
	return transport, nil
}

// ServingCertificates returns the builder of the node API's serving certificate manager for
// serverTLSBootstrap: the kubelet's own (a kubernetes.io/kubelet-serving CSR for the node's hostnames and
// IPs, made as the node; kept in --cert-dir as kubelet-server-current.pem; renewed before it expires).
// Nothing approves such CSRs by default: the cluster's operator (or an approver) does, as for the kubelet.
func ServingCertificates(cfg *config.Config) func(clientset.Interface, func() []corev1.NodeAddress) (certificate.Manager, error) {
	return func(kube clientset.Interface, addresses func() []corev1.NodeAddress) (certificate.Manager, error) {
		kc := &kubeletconfig.KubeletConfiguration{TLSCertFile: cfg.Kubelet.TLSCertFile, TLSPrivateKeyFile: cfg.Kubelet.TLSPrivateKeyFile}
		return kubeletcertificate.NewKubeletServerCertificateManager(kube, kc, types.NodeName(cfg.NodeName), addresses, cfg.CertDirectory())
	}
}

// registerClientTTL registers the kubelet's kubelet_certificate_manager_client_ttl_seconds for the client
// certificate manager, in the legacy registry beside the manager's own renewal-error counter: seconds until
// the current certificate expires (negative once it has), +Inf without one.
func registerClientTTL(mgr certificate.Manager, log logr.Logger) {
	err := legacyregistry.Registerer().Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Subsystem: "kubelet",
		Name: "certificate_manager_client_ttl_seconds",
		Help: "Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until certificate expiry " +
			"(negative if already expired). If client certificate is invalid or unused, the value will be +INF."},
		func() float64 {
			if c := mgr.Current(); c != nil && c.Leaf != nil {
				return math.Trunc(time.Until(c.Leaf.NotAfter).Seconds())
			}
			return math.Inf(1)
		}))
	if err != nil {
		log.Error(err, "Failed to register the client certificate TTL metric")
	}
}
