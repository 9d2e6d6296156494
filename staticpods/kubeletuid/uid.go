package kubeletuid

import (
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // the core group in legacyscheme, as the kubelet registers it
	"k8s.io/kubernetes/pkg/util/hash"
)

// UIDs returns the UID the kubelet gives each pod of a static pod manifest (one Pod, or the items of a
// PodList, in order): its pods decoded as the kubelet decodes them (to the internal API type, with the
// v1 defaults), hashed as its applyDefaults hashes them, with the node name and path for a file source
// (file is true) or the URL for the HTTP source. A pod that names its own UID keeps it.
func UIDs(data []byte, nodeName, source string, file bool) ([]types.UID, error) {
	pods, err := decode(data)
	if err != nil {
		return nil, err
	}
	uids := make([]types.UID, len(pods))
	for i, pod := range pods {
		if pod.UID != "" {
			uids[i] = pod.UID
			continue
		}
		h := fnv.New128a()
		hash.DeepHashObject(h, pod)
		if file {
			fmt.Fprintf(h, "host:%s", nodeName)
			fmt.Fprintf(h, "file:%s", source)
		} else {
			fmt.Fprintf(h, "url:%s", source)
		}
		uids[i] = types.UID(hex.EncodeToString(h.Sum(nil)))
	}
	return uids, nil
}

// decode reads the manifest as the kubelet's tryDecodeSinglePod, then tryDecodePodList, do.
func decode(data []byte) ([]*api.Pod, error) {
	if js, err := utilyaml.ToJSON(data); err == nil {
		if obj, err := runtime.Decode(legacyscheme.Codecs.UniversalDecoder(), js); err == nil {
			if pod, ok := obj.(*api.Pod); ok {
				return []*api.Pod{pod}, nil
			}
		}
	}
	obj, err := runtime.Decode(legacyscheme.Codecs.UniversalDecoder(), data)
	if err != nil {
		return nil, err
	}
	list, ok := obj.(*api.PodList)
	if !ok {
		return nil, errors.New("not a Pod or a PodList")
	}
	pods := make([]*api.Pod, len(list.Items))
	for i := range list.Items {
		pods[i] = &list.Items[i]
	}
	return pods, nil
}
