package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/mqtarget/mqtarget/config"
	"github.com/mqtarget/mqtarget/handlers"
	"github.com/mqtarget/mqtarget/internal/serve"
)

// yamlDocs decodes every document of a YAML file into values of T.
func yamlDocs[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []T
	dec := yaml.NewDecoder(f)
	for {
		var d T
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, len(docs)+1, err)
		}
		docs = append(docs, d)
	}
}

func TestEveryYAMLFileParses(t *testing.T) {
	var n int
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		n++
		t.Run(path, func(t *testing.T) {
			docs := yamlDocs[map[string]any](t, path)
			if len(docs) == 0 {
				t.Fatal("no YAML document")
			}
			for i, d := range docs {
				if len(d) == 0 {
					t.Errorf("document %d is empty", i+1)
				}
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 3 { // the manifests, prometheus.yml, docker-compose.yml
		t.Fatalf("found %d YAML files under deploy/, want at least 3", n)
	}
}

// The subset of the Kubernetes objects the checks below read; yaml.v3 ignores the other fields.
type (
	object struct {
		APIVersion string            `yaml:"apiVersion"`
		Kind       string            `yaml:"kind"`
		Metadata   metadata          `yaml:"metadata"`
		Data       map[string]string `yaml:"data"`
		Spec       spec              `yaml:"spec"`
	}
	metadata struct {
		Name        string            `yaml:"name"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	}
	spec struct {
		// A Deployment's selector has matchLabels, a Service's is a plain map: decoded by kind.
		Selector yaml.Node `yaml:"selector"`
		Template struct {
			Metadata metadata `yaml:"metadata"`
			Spec     podSpec  `yaml:"spec"`
		} `yaml:"template"`
		Ports []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	}
	podSpec struct {
		Containers []container `yaml:"containers"`
		Volumes    []struct {
			Name      string `yaml:"name"`
			ConfigMap *struct {
				Name string `yaml:"name"`
			} `yaml:"configMap"`
		} `yaml:"volumes"`
	}
	container struct {
		Name  string   `yaml:"name"`
		Image string   `yaml:"image"`
		Args  []string `yaml:"args"`
		Env   []struct {
			Name  string `yaml:"name"`
			Value string `yaml:"value"`
		} `yaml:"env"`
		Ports []struct {
			Name          string `yaml:"name"`
			ContainerPort int    `yaml:"containerPort"`
		} `yaml:"ports"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		StartupProbe   *probe `yaml:"startupProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
			Limits   map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"` // a number or a container port's name
		} `yaml:"httpGet"`
	}
)

// apiVersions are the kinds the examples use and their API groups.
var apiVersions = map[string]string{"ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1", "Pod": "v1"}

func manifests(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	var out []object
	for _, f := range files {
		out = append(out, yamlDocs[object](t, f)...)
	}
	return out
}

// TestKubernetesManifests checks what no schema can (TestManifestsMatchKubernetesSchemas checks the
// schemas): that the sidecar's ports, probes, ConfigMap and arguments fit mqtarget itself.
func TestKubernetesManifests(t *testing.T) {
	objs := manifests(t)
	configMaps := map[string]object{}
	var deployments, services []object
	for i, o := range objs {
		if o.Kind == "" || o.Metadata.Name == "" {
			t.Errorf("object %d: kind %q, metadata.name %q: both are required", i+1, o.Kind, o.Metadata.Name)
			continue
		}
		if want, ok := apiVersions[o.Kind]; !ok || o.APIVersion != want {
			t.Errorf("%s %s: apiVersion %q, want %q", o.Kind, o.Metadata.Name, o.APIVersion, want)
		}
		switch o.Kind {
		case "ConfigMap":
			configMaps[o.Metadata.Name] = o
		case "Deployment":
			deployments = append(deployments, o)
		case "Service":
			services = append(services, o)
		}
	}
	if len(deployments) != 1 {
		t.Fatalf("%d Deployments, want 1", len(deployments))
	}
	d := deployments[0]
	pod := d.Spec.Template.Spec
	var sel struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	if err := d.Spec.Selector.Decode(&sel); err != nil || len(sel.MatchLabels) == 0 {
		t.Errorf("Deployment has no spec.selector.matchLabels (%v)", err)
	}
	for k, v := range sel.MatchLabels {
		if d.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod template's labels %v", k, v, d.Spec.Template.Metadata.Labels)
		}
	}

	// Ports: unique across the pod (containers share one network namespace), names unique too.
	portOwner := map[int]string{}
	namedPort := map[string]int{}
	for _, c := range pod.Containers {
		if c.Name == "" || c.Image == "" {
			t.Errorf("container %q: name and image are required (image %q)", c.Name, c.Image)
		}
		for _, p := range c.Ports {
			if prev, ok := portOwner[p.ContainerPort]; ok {
				t.Errorf("port %d of %s is %s's too", p.ContainerPort, c.Name, prev)
			}
			portOwner[p.ContainerPort] = c.Name
			if _, ok := namedPort[p.Name]; ok && p.Name != "" {
				t.Errorf("port name %q used twice", p.Name)
			}
			if len(p.Name) > 15 {
				t.Errorf("port name %q is longer than 15 characters", p.Name)
			}
			namedPort[p.Name] = p.ContainerPort
		}
	}
	if portOwner[8080] == "mqtarget" {
		t.Error("mqtarget listens on 8080, the application's port")
	}

	idx := slices.IndexFunc(pod.Containers, func(c container) bool { return c.Name == "mqtarget" })
	if idx < 0 {
		t.Fatal("no container named mqtarget")
	}
	mq := pod.Containers[idx]
	cfg := loadSidecarConfig(t, mq, pod, configMaps)

	// mqtarget's listeners are the container's ports, and the probes reach the admin routes on them.
	ports := map[string]int{}
	for _, p := range mq.Ports {
		ports[p.Name] = p.ContainerPort
	}
	httpPort, adminPort := portOf(t, cfg.HTTP.Addr), portOf(t, cfg.HTTP.Addr)
	if cfg.HTTP.AdminAddr != "" {
		adminPort = portOf(t, cfg.HTTP.AdminAddr)
	}
	for _, want := range []int{httpPort, adminPort} {
		if !slices.Contains(mapValues(ports), want) {
			t.Errorf("mqtarget listens on %d (http.addr %q, http.admin_addr %q) but the container does not declare it",
				want, cfg.HTTP.Addr, cfg.HTTP.AdminAddr)
		}
	}
	adminPaths := map[string]bool{}
	for _, e := range handlers.Endpoints() {
		if e.Admin {
			adminPaths[e.Path] = true
		}
	}
	for _, pc := range []struct {
		name, wantPath string
		p              *probe
	}{
		{"livenessProbe", "/healthz", mq.LivenessProbe},
		{"readinessProbe", "/readyz", mq.ReadinessProbe},
		{"startupProbe", "", mq.StartupProbe},
	} {
		if pc.p == nil {
			if pc.wantPath != "" {
				t.Errorf("mqtarget has no %s", pc.name)
			}
			continue
		}
		if pc.p.HTTPGet == nil {
			t.Errorf("%s is not httpGet", pc.name)
			continue
		}
		if !adminPaths[pc.p.HTTPGet.Path] || (pc.wantPath != "" && pc.p.HTTPGet.Path != pc.wantPath) {
			t.Errorf("%s path %q: want %q, an admin route mqtarget serves", pc.name, pc.p.HTTPGet.Path, pc.wantPath)
		}
		if port := resolvePort(ports, pc.p.HTTPGet.Port); port != adminPort {
			t.Errorf("%s port %q is %d; the admin routes are on %d", pc.name, pc.p.HTTPGet.Port, port, adminPort)
		}
	}
	for _, kind := range []string{"requests", "limits"} {
		m := mq.Resources.Requests
		if kind == "limits" {
			m = mq.Resources.Limits
		}
		if m["memory"] == "" {
			t.Errorf("mqtarget has no memory %s", kind)
		}
	}
	if ann := d.Spec.Template.Metadata.Annotations; ann["prometheus.io/scrape"] != "true" ||
		resolvePort(ports, ann["prometheus.io/port"]) != adminPort || !adminPaths[ann["prometheus.io/path"]] {
		t.Errorf("scrape annotations %v do not point at /metrics on the admin port %d", ann, adminPort)
	}

	for _, s := range services {
		var sel map[string]string
		if err := s.Spec.Selector.Decode(&sel); err != nil || len(sel) == 0 {
			t.Errorf("Service %s has no selector (%v)", s.Metadata.Name, err)
		}
		for k, v := range sel {
			if d.Spec.Template.Metadata.Labels[k] != v {
				t.Errorf("Service %s selector %s=%s matches no pod of the Deployment", s.Metadata.Name, k, v)
			}
		}
		for _, p := range s.Spec.Ports {
			if resolvePort(namedPort, p.TargetPort) == 0 {
				t.Errorf("Service %s port %s: targetPort %q is no container port", s.Metadata.Name, p.Name, p.TargetPort)
			}
		}
	}
}

// loadSidecarConfig loads the mqtarget container's configuration as mqtarget would: its arguments, its
// MQTARGET_* variables and the file it names, read from the mounted ConfigMap.
func loadSidecarConfig(t *testing.T, c container, pod podSpec, configMaps map[string]object) config.Config {
	t.Helper()
	files := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name != m.Name || v.ConfigMap == nil {
				continue
			}
			cm, ok := configMaps[v.ConfigMap.Name]
			if !ok {
				t.Fatalf("volume %s names ConfigMap %q, which the manifests do not define", v.Name, v.ConfigMap.Name)
			}
			for key, data := range cm.Data {
				files[filepath.Join(m.MountPath, key)] = data
			}
		}
	}
	env := map[string]string{}
	var environ []string
	for _, e := range c.Env {
		env[e.Name] = e.Value
		environ = append(environ, e.Name+"="+e.Value)
	}
	cfg, _, err := config.Load(config.Sources{
		Args:      c.Args,
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Environ:   func() []string { return environ },
		ReadFile: func(name string) ([]byte, error) {
			data, ok := files[name]
			if !ok {
				return nil, fmt.Errorf("%s: not in a mounted ConfigMap (have %v)", name, mapKeys(files))
			}
			return []byte(data), nil
		},
		Output: io.Discard,
	})
	if err != nil {
		t.Fatalf("mqtarget's configuration (args %q) does not load: %v", c.Args, err)
	}
	if !slices.Contains(c.Args, "-config") {
		t.Errorf("args %q do not name the ConfigMap's file with -config", c.Args)
	}
	return cfg
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	var n int
	if _, err := fmt.Sscan(p, &n); err != nil {
		t.Fatalf("%q: port %q: %v", addr, p, err)
	}
	return n
}

// resolvePort returns the port a probe or Service names, by number or container port name; 0 if none.
func resolvePort(named map[string]int, p string) int {
	if n, ok := named[p]; ok && p != "" {
		return n
	}
	var n int
	if _, err := fmt.Sscan(p, &n); err == nil && slices.Contains(mapValues(named), n) {
		return n
	}
	return 0
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func mapKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestComposeFile checks docker-compose.yml: it parses, builds from the repository's Dockerfile, depends
// only on services it defines, and mqtarget's environment is real settings that load together.
func TestComposeFile(t *testing.T) {
	type service struct {
		Image string `yaml:"image"`
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Environment map[string]string         `yaml:"environment"`
		DependsOn   map[string]map[string]any `yaml:"depends_on"`
	}
	var compose struct {
		Services map[string]yaml.Node `yaml:"services"`
	}
	data, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, want := range []string{"mqtarget", "nsqd", "rocketmq-namesrv", "rocketmq-broker", "artemis"} {
		if _, ok := compose.Services[want]; !ok {
			t.Errorf("no service %q", want)
		}
	}
	var mq service
	if n, ok := compose.Services["mqtarget"]; !ok {
		t.Fatal("no mqtarget service")
	} else if err := n.Decode(&mq); err != nil {
		t.Fatalf("services.mqtarget: %v", err)
	}
	if mq.Build == nil {
		t.Fatal("mqtarget is not built from the repository")
	}
	if _, err := os.Stat(filepath.Join(mq.Build.Context, mq.Build.Dockerfile)); err != nil {
		t.Errorf("build: %v", err)
	}
	for dep := range mq.DependsOn {
		if _, ok := compose.Services[dep]; !ok {
			t.Errorf("mqtarget depends on %q, which is no service", dep)
		}
	}
	for name, n := range compose.Services {
		var s service
		// depends_on in its short (list) form does not decode into the map; only mqtarget uses it.
		if name == "mqtarget" {
			continue
		}
		_ = n.Decode(&s)
		if s.Image == "" {
			t.Errorf("service %s has no image", name)
		}
	}

	// Every MQTARGET_* variable is a setting's key, and together they load: hosts are host:port etc.
	keys := map[string]bool{}
	for _, k := range config.Keys() {
		keys[config.Env(k[0])] = true
	}
	var environ []string
	for k, v := range mq.Environment {
		if strings.HasPrefix(k, config.EnvPrefix) && !keys[k] {
			t.Errorf("environment %s names no setting", k)
		}
		environ = append(environ, k+"="+v)
	}
	cfg, _, err := config.Load(config.Sources{
		LookupEnv: func(k string) (string, bool) { v, ok := mq.Environment[k]; return v, ok },
		Environ:   func() []string { return environ },
		ReadFile:  os.ReadFile,
		Output:    io.Discard,
	})
	if err != nil {
		t.Fatalf("mqtarget's environment does not load: %v", err)
	}
	// Each broker points at a compose service, so no embedded broker starts in its place.
	for _, hosts := range [][]string{cfg.NSQ.Hosts, cfg.RocketMQ.NameServers, cfg.STOMP.Hosts} {
		if len(hosts) == 0 {
			t.Errorf("a broker without hosts: nsq %v, rocketmq %v, stomp %v", cfg.NSQ.Hosts, cfg.RocketMQ.NameServers, cfg.STOMP.Hosts)
			continue
		}
		for _, h := range hosts {
			host, _, _ := net.SplitHostPort(h)
			if _, ok := compose.Services[host]; !ok {
				t.Errorf("broker host %q is no compose service", h)
			}
		}
	}
}

var (
	identRE   = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	byRE      = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matcherRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	lvRE      = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s*,\s*([a-zA-Z_]+)\s*\)`)
	labelRE   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
	byLeRE    = regexp.MustCompile(`by \([^)]*\ble\b`)
	// histogram_quantile(φ, sum(...)) or histogram_quantile(φ, sum by (...) (...)).
	quantileOfSumRE = regexp.MustCompile(`histogram_quantile\(\s*[0-9.]+\s*,\s*sum\s*(?:by\s*\([^)]*\)\s*)?\(`)
	metricPfx       = []string{"mqtarget_", "process_", "go_"}
)

// TestDashboardQueriesExportedMetrics starts mqtarget with embedded nsqd, sends one request to every
// send endpoint (and a bad one, for a non-2xx code), scrapes /metrics, and checks that every metric and
// label the dashboard's queries use is there.
func TestDashboardQueriesExportedMetrics(t *testing.T) {
	exprs := dashboardExprs(t)
	samples, native := scrape(t)

	used := map[string]bool{}
	var nativeQueries int
	for _, expr := range exprs {
		var metrics []string
		for _, id := range identRE.FindAllString(expr, -1) {
			if slices.ContainsFunc(metricPfx, func(p string) bool { return strings.HasPrefix(id, p) }) {
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(id, "_bucket"), "_count"), "_sum")] = true
				if _, ok := samples[id]; ok {
					metrics = append(metrics, id)
					continue
				}
				// A histogram's bare name is its native histogram (the text format shows only the
				// classic series, so its labels are those of its _bucket series).
				if !native[id] {
					t.Errorf("%s: metric %s is not in /metrics, nor a native histogram", expr, id)
					continue
				}
				nativeQueries++
				metrics = append(metrics, id+"_bucket")
			}
		}
		if len(metrics) == 0 {
			t.Errorf("%s: queries no mqtarget metric", expr)
			continue
		}
		if strings.Contains(expr, "_bucket") && !byLeRE.MatchString(expr) {
			t.Errorf("%s: a histogram's buckets summed without by (le)", expr)
		}
		// Every replica's histogram is summed before the quantile: a quantile per replica cannot be
		// averaged into the fleet's.
		if n := strings.Count(expr, "histogram_quantile("); n != len(quantileOfSumRE.FindAllString(expr, -1)) {
			t.Errorf("%s: histogram_quantile of something not summed first (sum or sum by (...))", expr)
		}
		var labels []string
		for _, m := range byRE.FindAllStringSubmatch(expr, -1) {
			for _, l := range strings.Split(m[1], ",") {
				labels = append(labels, strings.TrimSpace(l))
			}
		}
		for _, m := range matcherRE.FindAllStringSubmatch(expr, -1) {
			labels = append(labels, m[1])
		}
		for _, m := range lvRE.FindAllStringSubmatch(expr, -1) {
			labels = append(labels, m[2])
		}
		for _, l := range labels {
			if l == "instance" || l == "job" || l == "" { // added by Prometheus at scrape time
				continue
			}
			if !slices.ContainsFunc(metrics, func(m string) bool { return samples[m][l] }) {
				t.Errorf("%s: label %q is on none of %v", expr, l, metrics)
			}
		}
	}
	if nativeQueries == 0 {
		t.Error("no panel queries a native histogram")
	}
	// The panels the dashboard exists for.
	for _, want := range []string{
		"mqtarget_http_request_duration_seconds", "mqtarget_publish_duration_seconds",
		"mqtarget_publish_messages_total", "mqtarget_publish_bytes_total", "mqtarget_async_in_flight",
		"mqtarget_broker_connections_total", "mqtarget_broker_reconnects_total", "mqtarget_protocol_errors_total",
	} {
		if !used[want] {
			t.Errorf("no panel queries %s", want)
		}
	}
}

// dashboardExprs returns every PromQL expression of the dashboard: the panels' and the variables'.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Type    string   `json:"type"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	data, err := os.ReadFile("grafana/mqtarget-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var exprs []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("panel %q: empty expr", p.Title)
				}
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		if q, ok := v.Query.(map[string]any); ok {
			s, _ := q["query"].(string)
			exprs = append(exprs, s)
		} else if s, ok := v.Query.(string); ok {
			exprs = append(exprs, s)
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("dashboard has %d queries; is this the right file?", len(exprs))
	}
	return exprs
}

// scrape runs mqtarget in-process, sends one request of each kind and returns /metrics' series names,
// each with the label names it carries, and the names of the histograms it also exports as native
// histograms (read from the protobuf exposition, which Prometheus negotiates for them).
func scrape(t *testing.T) (map[string]map[string]bool, map[string]bool) {
	t.Helper()
	cfg := config.Default()
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.ShutdownLameDuck = 0
	cfg.Log.Level = "error"
	a, err := serve.Start(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("serve.Start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	base := "http://" + a.Addr()
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode, body
	}
	for _, e := range handlers.Endpoints() {
		if !e.Send {
			continue
		}
		if code, body := get(e.Path); code/100 != 2 {
			t.Fatalf("GET %s: %d %s", e.Path, code, body)
		}
	}
	if code, _ := get("/send1?size=0"); code != http.StatusBadRequest {
		t.Fatalf("GET /send1?size=0: %d, want 400", code)
	}
	code, body := get("/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	native := nativeHistograms(t, client, base+"/metrics")
	out := map[string]map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		if rest != "" {
			for _, m := range labelRE.FindAllStringSubmatch(rest, -1) {
				out[name][m[1]] = true
			}
		}
	}
	return out, native
}

// nativeHistograms scrapes url in the protobuf exposition format and returns the histogram families
// whose series carry a native histogram (a schema and a zero threshold, or spans).
func nativeHistograms(t *testing.T, client *http.Client, url string) map[string]bool {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s (protobuf): %v", url, err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/vnd.google.protobuf") {
		t.Fatalf("GET %s (protobuf): Content-Type %q", url, ct)
	}
	out := map[string]bool{}
	r := bufio.NewReader(resp.Body)
	for {
		var mf dto.MetricFamily
		err := protodelim.UnmarshalFrom(r, &mf)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("GET %s (protobuf): %v", url, err)
		}
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil && (h.Schema != nil || len(h.GetPositiveSpan()) > 0 || h.ZeroThreshold != nil) {
				out[mf.GetName()] = true
			}
		}
	}
}

// TestPrometheusConfig checks the scrape configurations: their relabelling regexes compile (Prometheus
// uses RE2, as Go does); prometheus.yml, which docker-compose.yml mounts, scrapes only compose services
// (mqtarget on the port its http.addr listens on among them) and keeps the classic histograms beside
// native ones; kubernetes.yml's pod job keeps only annotated pods.
func TestPrometheusConfig(t *testing.T) {
	var prom struct {
		ScrapeConfigs []struct {
			JobName             string `yaml:"job_name"`
			AlwaysScrapeClassic bool   `yaml:"always_scrape_classic_histograms"`
			StaticConfigs       []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
			KubernetesSDConfigs []struct {
				Role string `yaml:"role"`
			} `yaml:"kubernetes_sd_configs"`
			RelabelConfigs []struct {
				SourceLabels []string `yaml:"source_labels"`
				Action       string   `yaml:"action"`
				Regex        string   `yaml:"regex"`
			} `yaml:"relabel_configs"`
		} `yaml:"scrape_configs"`
	}
	compose := composeServices(t)
	var static, pods bool
	for _, file := range []string{"prometheus/prometheus.yml", "prometheus/kubernetes.yml"} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		prom.ScrapeConfigs = nil
		if err := yaml.Unmarshal(data, &prom); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(prom.ScrapeConfigs) == 0 {
			t.Errorf("%s: no scrape_configs", file)
		}
		for _, sc := range prom.ScrapeConfigs {
			for _, rc := range sc.RelabelConfigs {
				if _, err := regexp.Compile("^(?:" + rc.Regex + ")$"); err != nil {
					t.Errorf("%s: job %s: regex %q: %v", file, sc.JobName, rc.Regex, err)
				}
				if rc.Action == "keep" && slices.Contains(rc.SourceLabels, "__meta_kubernetes_pod_annotation_prometheus_io_scrape") {
					pods = pods || file == "prometheus/kubernetes.yml"
				}
			}
			if strings.HasPrefix(sc.JobName, "mqtarget") || strings.HasPrefix(sc.JobName, "kubernetes") {
				if !sc.AlwaysScrapeClassic {
					t.Errorf("%s: job %s: without always_scrape_classic_histograms a Prometheus that ingests native histograms drops the classic buckets the dashboard's classic panels read", file, sc.JobName)
				}
			}
			for _, st := range sc.StaticConfigs {
				for _, target := range st.Targets {
					host, port, err := net.SplitHostPort(target)
					if err != nil {
						t.Errorf("%s: job %s: target %q: %v", file, sc.JobName, target, err)
						continue
					}
					if file != "prometheus/prometheus.yml" {
						t.Errorf("%s: job %s: static target %q in the Kubernetes configuration", file, sc.JobName, target)
					}
					if _, ok := compose[host]; !ok && host != "localhost" {
						t.Errorf("%s: job %s: target %q is no docker-compose.yml service", file, sc.JobName, target)
					}
					if host == "mqtarget" && port == fmt.Sprint(portOf(t, config.Default().HTTP.Addr)) {
						static = true
					}
				}
			}
		}
	}
	if !static {
		t.Error("no static job scrapes docker-compose.yml's mqtarget on http.addr's default port")
	}
	if !pods {
		t.Error("no Kubernetes job keeps the pods annotated prometheus.io/scrape")
	}
}
