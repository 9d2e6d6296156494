package csi

import "testing"

// The same socket seen twice — by the start-up scan and by its own Create event — is one socket: its
// registration is not dropped and made again (which would let another socket of the driver in between). A
// new socket at the path (another inode) is registered again.
func TestSameSocketSeenTwiceIsOneSocket(t *testing.T) {
	w := &PluginWatcher{Dir: t.TempDir()}
	w.init()
	w.socketCreated("/reg/a.sock", 7)
	gen := w.desired["/reg/a.sock"]
	w.socketCreated("/reg/a.sock", 7)
	if w.desired["/reg/a.sock"] != gen {
		t.Errorf("generation %d after seeing the same socket again, want %d", w.desired["/reg/a.sock"], gen)
	}
	w.socketCreated("/reg/a.sock", 8)
	if w.desired["/reg/a.sock"] == gen {
		t.Error("a new socket at the path kept the old generation")
	}
	w.gone("/reg/a.sock")
	w.socketCreated("/reg/a.sock", 8)
	if _, ok := w.desired["/reg/a.sock"]; !ok {
		t.Error("a socket made again after its removal is not desired")
	}
}
