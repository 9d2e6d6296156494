package podsyncer

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// A pull secret's entry for the image's registry becomes the CRI credentials as the kubelet makes them: the
// user and password from "auth" when only it is given, and no server address (containerd drops credentials
// whose server address is not a URL of the host it pulls from, which docker config keys are not).
func TestMatchAuthIsTheKubelets(t *testing.T) {
	secret := func(cfg string) *corev1.Secret {
		return &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(cfg)}}
	}
	for name, tc := range map[string]struct {
		secret         *corev1.Secret
		domain         string
		ok             bool
		user, password string
	}{
		"auth only, registry with a port": {secret(`{"auths":{"localhost:5000":{"auth":"dXNlcjpwYXNzd29yZA=="}}}`),
			"localhost:5000", true, "user", "password"},
		"docker hub's legacy key": {secret(`{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}`),
			"docker.io", true, "u", "p"},
		"another registry": {secret(`{"auths":{"registry.example:5000":{"username":"u","password":"p"}}}`),
			"localhost:5000", false, "", ""},
		"dockercfg": {&corev1.Secret{Type: corev1.SecretTypeDockercfg,
			Data: map[string][]byte{corev1.DockerConfigKey: []byte(`{"http://registry.example":{"username":"u","password":"p"}}`)}},
			"registry.example", true, "u", "p"},
		"malformed": {secret(`{"auths":`), "localhost:5000", false, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			auth, _, ok := matchAuth(tc.secret, tc.domain)
			if ok != tc.ok {
				t.Fatalf("matched %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if auth.Username != tc.user || auth.Password != tc.password || auth.ServerAddress != "" {
				t.Errorf("auth = %+v, want user %q password %q and no server address", auth, tc.user, tc.password)
			}
		})
	}
}
