package podsyncer

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/nodelet/nodelet/imagepull"
)

// dockerConfig is the content of a kubernetes.io/dockerconfigjson or dockercfg Secret.
type dockerConfig struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Username      string `json:"username"`
	Password      string `json:"password"`
	Email         string `json:"email"`
	Auth          string `json:"auth"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// pullCredentials returns the pod's imagePullSecrets that match the image's registry: the first is the
// one pulls use, all of them may show the pod holds the credentials an image on the node was pulled with.
// Missing or malformed secrets are skipped, as in the kubelet (a pull then goes anonymous).
func (b *configBuilder) pullCredentials(ctx context.Context, pod *corev1.Pod, image string) pullCredentials {
	var out pullCredentials
	if len(pod.Spec.ImagePullSecrets) == 0 || b.secrets == nil {
		return out
	}
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return out
	}
	domain := reference.Domain(named)
	for _, ref := range pod.Spec.ImagePullSecrets {
		s, err := b.secrets.GetSecret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Unable to retrieve pull secret, the image pull may not succeed", "secret", ref.Name, "err", err.Error())
			continue
		}
		auth, a, ok := matchAuth(s, domain)
		if !ok {
			continue
		}
		secret := imagepull.Secret{UID: string(s.UID), Namespace: s.Namespace, Name: s.Name, CredentialHash: credentialHash(a)}
		out.secrets = append(out.secrets, secret)
		if out.auth == nil {
			out.auth, out.source = auth, &secret
		}
	}
	return out
}

// matchAuth returns the secret's credentials for the image's registry domain, if it has any.
func matchAuth(s *corev1.Secret, domain string) (*runtimeapi.AuthConfig, dockerAuth, bool) {
	var cfg dockerConfig
	switch s.Type {
	case corev1.SecretTypeDockerConfigJson:
		if json.Unmarshal(s.Data[corev1.DockerConfigJsonKey], &cfg) != nil {
			return nil, dockerAuth{}, false
		}
	case corev1.SecretTypeDockercfg:
		if json.Unmarshal(s.Data[corev1.DockerConfigKey], &cfg.Auths) != nil {
			return nil, dockerAuth{}, false
		}
	default:
		return nil, dockerAuth{}, false
	}
	for key, a := range cfg.Auths {
		if !registryMatches(registryHost(key), domain) {
			continue
		}
		if a.Username == "" && a.Auth != "" {
			if b, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
				a.Username, a.Password, _ = strings.Cut(string(b), ":")
			}
		}
		// No ServerAddress, as the kubelet: containerd drops credentials whose server address does not parse
		// as a URL of the host it pulls from, and a docker config key ("registry:5000",
		// "https://index.docker.io/v1/") is neither.
		out := &runtimeapi.AuthConfig{Username: a.Username, Password: a.Password, Auth: a.Auth,
			IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
		return out, a, true
	}
	return nil, dockerAuth{}, false
}

// credentialHash is the kubelet's hash of a pull secret's credentials (SHA-256 of the JSON of its user
// name, password and e-mail), so records match a secret by content across names, as the kubelet's do.
func credentialHash(a dockerAuth) string {
	data, err := json.Marshal(struct {
		Username string `json:"username,omitempty"`
		Password string `json:"password,omitempty"`
		Email    string `json:"email,omitempty"`
	}{a.Username, a.Password, a.Email})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// registryMatches reports whether a docker config host serves the image's domain.
func registryMatches(host, domain string) bool {
	return host == domain || domain == "docker.io" && host == "index.docker.io"
}

// registryHost reduces a docker config key ("https://index.docker.io/v1/", "registry:5000") to a host.
func registryHost(key string) string {
	key = strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
	host, _, _ := strings.Cut(key, "/")
	return host
}
