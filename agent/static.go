package agent

import (
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/staticpods"
)

// staticKinds are the static pod sources the configuration names.
func (a *Agent) staticKinds() []string {
	var kinds []string
	if a.cfg.Kubelet.StaticPodPath != "" {
		kinds = append(kinds, staticpods.SourceFile)
	}
	if a.cfg.Kubelet.StaticPodURL != "" {
		kinds = append(kinds, staticpods.SourceHTTP)
	}
	return kinds
}

// staticPods starts the static pod sources the configuration names (nil when it names none).
func (a *Agent) staticPods(recorder record.EventRecorder) *staticpods.Store {
	kc := &a.cfg.Kubelet
	if kc.StaticPodPath == "" && kc.StaticPodURL == "" {
		return nil
	}
	nodeRef := &corev1.ObjectReference{Kind: "Node", Name: a.cfg.NodeName, UID: types.UID(a.cfg.NodeName)}
	log := a.log.WithName("staticpods")
	report := func(reason, message string) {
		log.Info("Static pod source problem", "reason", reason, "message", message)
		recorder.Event(nodeRef, corev1.EventTypeWarning, reason, message)
	}
	store := staticpods.NewStore(a.cfg.NodeName, report)
	if kc.StaticPodPath != "" {
		a.local = append(a.local, &staticpods.FileSource{Path: kc.StaticPodPath, Period: kc.FileCheckFrequency.Duration,
			NodeName: a.cfg.NodeName, Clock: a.clock(), Store: store, Report: report, UIDs: a.opts.StaticPodUIDs})
	}
	if kc.StaticPodURL != "" {
		header := http.Header{}
		for k, vs := range kc.StaticPodURLHeader {
			for _, v := range vs {
				header.Add(k, v)
			}
		}
		a.local = append(a.local, &staticpods.URLSource{URL: kc.StaticPodURL, Header: header, Period: kc.HTTPCheckFrequency.Duration,
			NodeName: a.cfg.NodeName, Clock: a.clock(), Store: store, Report: report, UIDs: a.opts.StaticPodUIDs})
	}
	return store
}
