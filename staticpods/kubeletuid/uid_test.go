package kubeletuid_test

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/staticpods"
	"github.com/nodelet/nodelet/staticpods/kubeletuid"
)

// The kubelet v1.37.1 ran testdata/static.yaml from /var/lib/nodelet-bed-handover/manifests on node "vm"
// (hack/handover.sh) under the sandbox UID below, read from containerd's log of its RunPodSandbox.
const (
	kubeletSource = "/var/lib/nodelet-bed-handover/manifests/static.yaml"
	kubeletNode   = "vm"
	kubeletUID    = types.UID("296e2567e8321330fb0d840b7afadc06")
)

func TestTheKubeletsUID(t *testing.T) {
	data, err := os.ReadFile("testdata/static.yaml")
	if err != nil {
		t.Fatal(err)
	}
	uids, err := kubeletuid.UIDs(data, kubeletNode, kubeletSource, true)
	if err != nil || len(uids) != 1 || uids[0] != kubeletUID {
		t.Fatalf("UIDs = %v, %v; want [%s]", uids, err, kubeletUID)
	}
	// Node and source enter the hash: another node, path or the HTTP source gives another UID.
	for _, other := range []struct {
		node, source string
		file         bool
	}{{"vm2", kubeletSource, true}, {kubeletNode, kubeletSource + "x", true}, {kubeletNode, "http://example/static.yaml", false}} {
		u, err := kubeletuid.UIDs(data, other.node, other.source, other.file)
		if err != nil || u[0] == kubeletUID {
			t.Errorf("UIDs(%+v) = %v, %v; want a different UID", other, u, err)
		}
	}

	// Through staticpods: the static pod gets the kubelet's UID, which is also its config hash.
	pods, err := staticpods.DecodeWith(data, kubeletNode, kubeletSource, kubeletuid.UIDs)
	if err != nil {
		t.Fatal(err)
	}
	if pods[0].UID != kubeletUID || pods[0].Annotations[staticpods.AnnotationConfigHash] != string(kubeletUID) {
		t.Errorf("static pod UID %s, config hash %q; want %s", pods[0].UID, pods[0].Annotations[staticpods.AnnotationConfigHash], kubeletUID)
	}
}

func TestPodListAndOwnUIDs(t *testing.T) {
	list := []byte(`{"apiVersion":"v1","kind":"PodList","items":[
 {"metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}},
 {"metadata":{"name":"b","uid":"my-own-uid"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}]}`)
	uids, err := kubeletuid.UIDs(list, kubeletNode, "/etc/kubernetes/manifests/list.json", true)
	if err != nil || len(uids) != 2 {
		t.Fatalf("UIDs = %v, %v", uids, err)
	}
	if len(uids[0]) != 32 || uids[1] != "my-own-uid" {
		t.Errorf("UIDs = %v; want a 128-bit hash, then the pod's own UID", uids)
	}
	if _, err := kubeletuid.UIDs([]byte("kind: Service\napiVersion: v1\nmetadata: {name: x}\n"), kubeletNode, "/x", true); err == nil {
		t.Error("a Service was hashed as a pod")
	}
}
