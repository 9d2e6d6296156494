package staticpods

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// checkAPIReferences rejects, as the kubelet, a static pod that references API objects: a static pod must
// run without an API server, and the node may read only objects its API pods reference.
func checkAPIReferences(pod *corev1.Pod) error {
	spec := &pod.Spec
	path := field.NewPath("spec")
	switch {
	case spec.ServiceAccountName != "":
		return forbidRef(path.Child("serviceAccountName"), "serviceaccounts")
	case len(spec.ImagePullSecrets) > 0:
		return forbidRef(path.Child("imagePullSecrets"), "secrets")
	case len(spec.ResourceClaims) > 0:
		return forbidRef(path.Child("resourceClaims"), "resourceclaims")
	}
	if err := containersReferences(spec.InitContainers, path.Child("initContainers")); err != nil {
		return err
	}
	if err := containersReferences(spec.Containers, path.Child("containers")); err != nil {
		return err
	}
	for i := range spec.Volumes {
		if p, what := volumeReference(&spec.Volumes[i], path.Child("volumes").Index(i)); what != "" {
			return forbidRef(p, what)
		}
	}
	return nil
}

func forbidRef(path *field.Path, what string) error {
	return field.Forbidden(path, "static pods may not reference "+what)
}

func containersReferences(cs []corev1.Container, path *field.Path) error {
	for i := range cs {
		p := path.Index(i)
		for j, e := range cs[i].Env {
			if p, what := envReference(e.ValueFrom, p.Child("env").Index(j).Child("valueFrom")); what != "" {
				return forbidRef(p, what)
			}
		}
		for j, e := range cs[i].EnvFrom {
			ep := p.Child("envFrom").Index(j)
			switch {
			case e.SecretRef != nil:
				return forbidRef(ep.Child("secretRef"), "secrets")
			case e.ConfigMapRef != nil:
				return forbidRef(ep.Child("configMapRef"), "configmaps")
			}
		}
	}
	return nil
}

func envReference(from *corev1.EnvVarSource, path *field.Path) (*field.Path, string) {
	switch {
	case from == nil:
		return nil, ""
	case from.SecretKeyRef != nil:
		return path.Child("secretKeyRef"), "secrets"
	case from.ConfigMapKeyRef != nil:
		return path.Child("configMapKeyRef"), "configmaps"
	}
	return nil, ""
}

func volumeReference(v *corev1.Volume, path *field.Path) (*field.Path, string) {
	switch {
	case v.ConfigMap != nil:
		return path.Child("configMap"), "configmaps (via configmap volumes)"
	case v.Secret != nil:
		return path.Child("secret"), "secrets (via secret volumes)"
	case v.CSI != nil:
		return path.Child("csi"), "csidrivers (via CSI volumes)"
	case v.Glusterfs != nil:
		return path.Child("glusterfs"), "endpoints (via glusterFS volumes)"
	case v.PersistentVolumeClaim != nil:
		return path.Child("persistentVolumeClaim"), "persistentvolumeclaims"
	case v.Ephemeral != nil:
		return path.Child("ephemeral"), "persistentvolumeclaims (via ephemeral volumes)"
	case v.AzureFile != nil:
		return path.Child("azureFile"), "secrets (via azureFile volumes)"
	case v.Projected != nil:
		return projectedReference(v.Projected.Sources, path.Child("projected", "sources"))
	}
	return nil, ""
}

func projectedReference(sources []corev1.VolumeProjection, path *field.Path) (*field.Path, string) {
	for i, s := range sources {
		p := path.Index(i)
		switch {
		case s.ConfigMap != nil:
			return p.Child("configMap"), "configmaps (via projected volumes)"
		case s.Secret != nil:
			return p.Child("secret"), "secrets (via projected volumes)"
		case s.ServiceAccountToken != nil:
			return p.Child("serviceAccountToken"), "serviceaccounts (via projected volumes)"
		case s.ClusterTrustBundle != nil:
			return p.Child("clusterTrustBundle"), "clustertrustbundles"
		case s.PodCertificate != nil:
			return p.Child("podCertificate"), "podcertificates"
		}
	}
	return nil, ""
}
