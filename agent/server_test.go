package agent

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/nodelet/nodelet/config"
	"github.com/nodelet/nodelet/server"
)

func TestDebugOptionsFollowTheConfiguration(t *testing.T) {
	loaded, err := config.Load([]string{"--hostname-override=node-a", "--contention-profiling"})
	if err != nil {
		t.Fatal(err)
	}
	var o server.Options
	debugOptions(&o, loaded)
	if o.DisableProfilingHandler || !o.ContentionProfiling || o.DisableStatusz || o.Flagz == nil {
		t.Errorf("defaults with --contention-profiling: %+v, want profiling with contention, /statusz and /flagz", o)
	}
	if flags := o.Flagz.GetFlagz(); flags["hostname-override"] != "node-a" {
		t.Errorf("/flagz reads %v, want the command line", flags)
	}

	off := config.Default("node-a")
	off.Kubelet.EnableProfilingHandler = ptr.To(false)
	off.Kubelet.FeatureGates = map[string]bool{"ComponentStatusz": false}
	o = server.Options{}
	debugOptions(&o, off)
	if !o.DisableProfilingHandler || o.ContentionProfiling || !o.DisableStatusz || o.Flagz != nil {
		t.Errorf("profiling off, ComponentStatusz off, no command line: %+v", o)
	}

	gated, err := config.Load([]string{"--hostname-override=node-a", "--feature-gates=ComponentFlagz=false"})
	if err != nil {
		t.Fatal(err)
	}
	o = server.Options{}
	debugOptions(&o, gated)
	if o.Flagz != nil {
		t.Error("/flagz served with ComponentFlagz off")
	}
}
