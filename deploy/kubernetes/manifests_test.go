// Package kubernetes holds the tests that keep weir's Kubernetes manifests
// valid. It is its own Go module so that the weir binary never carries the
// Kubernetes API packages the tests decode the manifests with.
package kubernetes

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const dir = "."

// kustomization is the part of kustomize's Kustomization that the manifests
// use; decoding it strictly catches a misspelt or unsupported field.
type kustomization struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Labels     []struct {
		Pairs map[string]string `json:"pairs"`
	} `json:"labels"`
	Resources []string `json:"resources"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// manifests holds every object of the kustomization, decoded strictly.
type manifests struct {
	kust        kustomization
	namespaces  []corev1.Namespace
	accounts    map[string]corev1.ServiceAccount
	configMaps  map[string]corev1.ConfigMap
	daemonSets  []appsv1.DaemonSet
	deployments []appsv1.Deployment
	services    []corev1.Service
}

func load(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{accounts: map[string]corev1.ServiceAccount{}, configMaps: map[string]corev1.ConfigMap{}}
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, &m.kust); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if m.kust.APIVersion != "kustomize.config.k8s.io/v1beta1" || m.kust.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: apiVersion %q kind %q", m.kust.APIVersion, m.kust.Kind)
	}
	// Every manifest in the folder is a resource, and every resource exists.
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var listed []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			listed = append(listed, b)
		}
	}
	res := slices.Clone(m.kust.Resources)
	sort.Strings(res)
	sort.Strings(listed)
	if !slices.Equal(res, listed) {
		t.Fatalf("kustomization resources %v, folder holds %v", res, listed)
	}
	for _, name := range m.kust.Resources {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range splitDocs(raw) {
			if err := m.decode(doc); err != nil {
				t.Fatalf("%s document %d: %v", name, i+1, err)
			}
		}
	}
	return m
}

// splitDocs splits a YAML stream at its "---" separators, dropping empty
// documents (a file of comments only).
func splitDocs(raw []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		if strings.TrimSpace(regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(d, "")) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// decode decodes one document into the upstream type its kind names,
// refusing unknown fields.
func (m *manifests) decode(doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	strict := func(v any) error { return yaml.UnmarshalStrict(doc, v) }
	switch gk := head.APIVersion + "/" + head.Kind; gk {
	case "v1/Namespace":
		var o corev1.Namespace
		if err := strict(&o); err != nil {
			return err
		}
		m.namespaces = append(m.namespaces, o)
	case "v1/ServiceAccount":
		var o corev1.ServiceAccount
		if err := strict(&o); err != nil {
			return err
		}
		m.accounts[o.Name] = o
	case "v1/ConfigMap":
		var o corev1.ConfigMap
		if err := strict(&o); err != nil {
			return err
		}
		m.configMaps[o.Name] = o
	case "apps/v1/DaemonSet":
		var o appsv1.DaemonSet
		if err := strict(&o); err != nil {
			return err
		}
		m.daemonSets = append(m.daemonSets, o)
	case "apps/v1/Deployment":
		var o appsv1.Deployment
		if err := strict(&o); err != nil {
			return err
		}
		m.deployments = append(m.deployments, o)
	case "v1/Service":
		var o corev1.Service
		if err := strict(&o); err != nil {
			return err
		}
		m.services = append(m.services, o)
	default:
		return fmt.Errorf("unexpected kind %s", gk)
	}
	return nil
}

func TestManifestsDecodeStrictly(t *testing.T) {
	m := load(t)
	// Deployments: the collector, then weir ingest (files in name order).
	if len(m.daemonSets) != 1 || len(m.deployments) != 2 || len(m.services) != 1 || len(m.namespaces) != 1 ||
		m.deployments[0].Name != "weir-collector" || m.deployments[1].Name != "weir-ingest" {
		t.Fatalf("want one DaemonSet, two Deployments (weir-collector, weir-ingest), one Service and Namespace; got %d %d %d %d",
			len(m.daemonSets), len(m.deployments), len(m.services), len(m.namespaces))
	}
	if m.namespaces[0].Name != m.kust.Namespace {
		t.Errorf("namespace %q, kustomization puts everything in %q", m.namespaces[0].Name, m.kust.Namespace)
	}
}

// podSpecs returns each workload's pod template by name.
func (m *manifests) podSpecs() map[string]corev1.PodTemplateSpec {
	p := map[string]corev1.PodTemplateSpec{}
	for _, d := range m.daemonSets {
		p["DaemonSet/"+d.Name] = d.Spec.Template
	}
	for _, d := range m.deployments {
		p["Deployment/"+d.Name] = d.Spec.Template
	}
	return p
}

// TestLeastPrivilege: no pod is privileged, none can gain privileges, every
// container drops all capabilities and the agent adds back only what its
// source needs (README, "Privileges": AF_PACKET keeps cap_net_raw).
func TestLeastPrivilege(t *testing.T) {
	m := load(t)
	for name, tmpl := range m.podSpecs() {
		spec := tmpl.Spec
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s mounts a service account token; weir uses no Kubernetes API", name)
		}
		if _, ok := m.accounts[spec.ServiceAccountName]; !ok {
			t.Errorf("%s runs as service account %q, which is not defined", name, spec.ServiceAccountName)
		}
		for _, c := range spec.Containers {
			sc := c.SecurityContext
			if sc == nil {
				t.Fatalf("%s/%s has no securityContext", name, c.Name)
			}
			if sc.Privileged != nil && *sc.Privileged {
				t.Errorf("%s/%s is privileged", name, c.Name)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s/%s allows privilege escalation", name, c.Name)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s/%s has a writable root filesystem", name, c.Name)
			}
			if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
				t.Errorf("%s/%s does not drop ALL capabilities", name, c.Name)
			}
			want := []corev1.Capability(nil)
			if strings.HasPrefix(name, "DaemonSet/") {
				want = []corev1.Capability{"NET_RAW"}
			}
			if sc.Capabilities != nil && !slices.Equal(sc.Capabilities.Add, want) {
				t.Errorf("%s/%s adds capabilities %v, want %v", name, c.Name, sc.Capabilities.Add, want)
			}
			if c.Resources.Limits.Memory().IsZero() {
				t.Errorf("%s/%s has no memory limit", name, c.Name)
			}
		}
	}
	ds := m.daemonSets[0].Spec.Template.Spec
	if !ds.HostNetwork || ds.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("agent: hostNetwork %v dnsPolicy %q: AF_PACKET must see the node's interfaces", ds.HostNetwork, ds.DNSPolicy)
	}
	dp := m.deployments[0].Spec.Template.Spec
	if dp.HostNetwork || dp.SecurityContext == nil || dp.SecurityContext.RunAsNonRoot == nil || !*dp.SecurityContext.RunAsNonRoot {
		t.Errorf("collector: it needs no host network and no root")
	}
}

// TestWiring: selectors match their pods, the Service's target ports exist,
// each container reads a --config file its ConfigMap holds.
func TestWiring(t *testing.T) {
	m := load(t)
	for _, d := range m.daemonSets {
		matches(t, "DaemonSet/"+d.Name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	for _, d := range m.deployments {
		matches(t, "Deployment/"+d.Name, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
	}
	svc := m.services[0]
	dep := m.deployments[0]
	matches(t, "Service/"+svc.Name, svc.Spec.Selector, dep.Spec.Template.Labels)
	for _, p := range svc.Spec.Ports {
		found := false
		for _, cp := range dep.Spec.Template.Spec.Containers[0].Ports {
			found = found || (cp.Name == p.TargetPort.StrVal && cp.Protocol == p.Protocol)
		}
		if !found {
			t.Errorf("Service port %s targets %q/%s, which the collector does not expose", p.Name, p.TargetPort.StrVal, p.Protocol)
		}
	}
	for name, tmpl := range m.podSpecs() {
		for _, c := range tmpl.Spec.Containers {
			cm, key := configOf(t, name, tmpl.Spec, c)
			if _, ok := m.configMaps[cm].Data[key]; !ok {
				t.Errorf("%s reads %s from ConfigMap %q, which has no such key", name, key, cm)
			}
		}
	}
	// The agent exports to the collector's Service by its cluster DNS name.
	agentCfg := m.configMaps["weir-agent"].Data["capture.yaml"]
	want := fmt.Sprintf("ipfix+tcp://%s.%s.svc.cluster.local:%d", svc.Name, m.kust.Namespace, svc.Spec.Ports[1].Port)
	if !strings.Contains(agentCfg, want) {
		t.Errorf("agent config does not export to %s:\n%s", want, agentCfg)
	}
}

func matches(t *testing.T, what string, selector, labels map[string]string) {
	t.Helper()
	if len(selector) == 0 {
		t.Errorf("%s: empty selector", what)
	}
	for k, v := range selector {
		if labels[k] != v {
			t.Errorf("%s: selector %s=%s does not match the pod labels %v", what, k, v, labels)
		}
	}
}

// configOf returns the ConfigMap and key behind a container's --config flag.
func configOf(t *testing.T, name string, spec corev1.PodSpec, c corev1.Container) (string, string) {
	t.Helper()
	var path string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			path = v
		}
	}
	if path == "" {
		t.Fatalf("%s/%s: no --config= argument in %v", name, c.Name, c.Args)
	}
	for _, vm := range c.VolumeMounts {
		if filepath.Dir(path) != vm.MountPath {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				return v.ConfigMap.Name, filepath.Base(path)
			}
		}
	}
	t.Fatalf("%s/%s: %s is not on a ConfigMap volume", name, c.Name, path)
	return "", ""
}

// TestConfigKeysAreFlags: every key of the weir config files the ConfigMaps
// carry is a long flag of the command the container runs, as that command's
// own `weir config example` lists them (so a renamed flag breaks this test,
// not a cluster).
func TestConfigKeysAreFlags(t *testing.T) {
	m := load(t)
	bin := filepath.Join(t.TempDir(), "weir")
	build := exec.Command("go", "build", "-o", bin, "./cmd/weir")
	build.Dir = "../.."
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building weir: %v\n%s", err, out)
	}
	for name, tmpl := range m.podSpecs() {
		c := tmpl.Spec.Containers[0]
		cmd := c.Args[0]
		flags := helpFlags(t, bin, cmd)
		for _, a := range c.Args[1:] {
			f := strings.TrimPrefix(strings.SplitN(a, "=", 2)[0], "--")
			if !flags[f] {
				t.Errorf("%s: argument %s is not a flag of weir %s", name, a, cmd)
			}
		}
		cm, key := configOf(t, name, tmpl.Spec, c)
		var cfg map[string]any
		if err := yaml.UnmarshalStrict([]byte(m.configMaps[cm].Data[key]), &cfg); err != nil {
			t.Fatalf("%s: %s: %v", name, key, err)
		}
		if len(cfg) == 0 {
			t.Errorf("%s: %s is empty", name, key)
		}
		for k := range cfg {
			if !flags[k] {
				t.Errorf("%s: %s key %q is not a flag of weir %s", name, key, k, cmd)
			}
		}
	}
}

// helpFlags returns the long flag names of weir CMD: the keys its
// `weir config example CMD` lists, plus --config itself.
func helpFlags(t *testing.T, bin, cmd string) map[string]bool {
	t.Helper()
	out, err := exec.Command(bin, "config", "example", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("weir config example %s: %v\n%s", cmd, err, out)
	}
	flags := map[string]bool{"config": true}
	for _, m := range regexp.MustCompile(`(?m)^# ([a-z][a-z0-9-]*):`).FindAllSubmatch(out, -1) {
		flags[string(m[1])] = true
	}
	if len(flags) < 5 || !flags["duration"] {
		t.Fatalf("weir config example %s lists %d flags:\n%s", cmd, len(flags), out)
	}
	return flags
}
