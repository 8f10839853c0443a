package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// composeService is the part of a docker-compose.yml service the checks read.
type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string            `yaml:"context"`
		Dockerfile string            `yaml:"dockerfile"`
		Args       map[string]string `yaml:"args"`
	} `yaml:"build"`
	Command     yaml.Node         `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval"`
		Timeout  string   `yaml:"timeout"`
		Retries  int      `yaml:"retries"`
	} `yaml:"healthcheck"`
}

// composeServices decodes docker-compose.yml's services (the keys above; others are ignored).
func composeServices(t *testing.T) map[string]composeService {
	t.Helper()
	data, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]yaml.Node `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	out := map[string]composeService{}
	for name, n := range compose.Services {
		var s composeService
		if err := n.Decode(&s); err != nil {
			t.Fatalf("services.%s: %v", name, err)
		}
		out[name] = s
	}
	return out
}

// pinnedImageRE: name:tag with a tag that names a release, not latest or a moving major.
var pinnedImageRE = regexp.MustCompile(`^[a-z0-9./_-]+:v?[0-9]+\.[0-9]+\.[0-9]+$`)

// TestComposeRunsEndToEnd checks what `docker compose up` needs and no engine here can try: mqtarget
// waits for every broker's healthcheck (a broker still starting made it exit and restart in a loop),
// every service depended on exists, images are pinned releases, host ports are not taken twice, every
// file mounted from the repository exists, Prometheus gets the scrape configuration whose targets are
// compose services (TestPrometheusConfig), and Grafana gets the data source and the dashboard.
func TestComposeRunsEndToEnd(t *testing.T) {
	services := composeServices(t)
	for _, want := range []string{"mqtarget", "nsqd", "prometheus", "grafana"} {
		if _, ok := services[want]; !ok {
			t.Errorf("no service %q", want)
		}
	}
	hostPorts := map[string]string{}
	for name, s := range services {
		if s.Build == nil && !pinnedImageRE.MatchString(s.Image) {
			t.Errorf("%s: image %q is not pinned to a release (name:X.Y.Z)", name, s.Image)
		}
		for dep, d := range s.DependsOn {
			ds, ok := services[dep]
			if !ok {
				t.Errorf("%s depends on %q, which is no service", name, dep)
				continue
			}
			switch d.Condition {
			case "service_healthy":
				if ds.Healthcheck == nil && ds.Build == nil { // a built image has its own HEALTHCHECK
					t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
				}
			case "service_started", "service_completed_successfully":
			default:
				t.Errorf("%s: depends_on %s: condition %q", name, dep, d.Condition)
			}
		}
		if hc := s.Healthcheck; hc != nil {
			if len(hc.Test) < 2 || (hc.Test[0] != "CMD" && hc.Test[0] != "CMD-SHELL") || hc.Retries < 1 || hc.Interval == "" || hc.Timeout == "" {
				t.Errorf("%s: healthcheck %+v: want test [CMD ...], interval, timeout and retries", name, *hc)
			}
		}
		for _, p := range s.Ports {
			host, _, ok := strings.Cut(p, ":")
			if !ok {
				t.Errorf("%s: port %q: want HOST:CONTAINER", name, p)
				continue
			}
			if prev, ok := hostPorts[host]; ok {
				t.Errorf("host port %s is both %s's and %s's", host, prev, name)
			}
			hostPorts[host] = name
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, ".") {
				continue // a named volume
			}
			if _, err := os.Stat(src); err != nil {
				t.Errorf("%s: volume %q: %v", name, v, err)
			}
		}
	}

	// mqtarget starts once every broker it publishes to is healthy.
	mq := services["mqtarget"]
	for _, broker := range []string{"nsqd", "rocketmq-broker", "artemis"} {
		if _, ok := services[broker]; !ok {
			continue
		}
		if mq.DependsOn[broker].Condition != "service_healthy" {
			t.Errorf("mqtarget does not wait for %s to be healthy (depends_on %+v)", broker, mq.DependsOn)
		}
	}
	if b := mq.Build; b == nil || b.Args["REVISION"] == "" {
		t.Error("mqtarget's build passes no REVISION (the image's revision would be unknown)")
	}

	mounts := func(name, target string) string {
		for _, v := range services[name].Volumes {
			if src, rest, _ := strings.Cut(v, ":"); strings.TrimSuffix(rest, ":ro") == target {
				return src
			}
		}
		t.Errorf("%s mounts nothing at %s (volumes %v)", name, target, services[name].Volumes)
		return ""
	}
	if src := mounts("prometheus", "/etc/prometheus/prometheus.yml"); src != "./prometheus/prometheus.yml" {
		t.Errorf("prometheus mounts %q, not deploy/prometheus/prometheus.yml", src)
	}
	var promArgs []string
	promCmd := services["prometheus"].Command
	if err := promCmd.Decode(&promArgs); err != nil || !slices.Contains(promArgs, "--config.file=/etc/prometheus/prometheus.yml") {
		t.Errorf("prometheus command %v (%v) does not read the mounted file", promArgs, err)
	}

	// Grafana: the provisioned data source is compose's Prometheus, and the dashboard provider's path
	// holds the mounted dashboard.
	var ds struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, mounts("grafana", "/etc/grafana/provisioning/datasources/prometheus.yml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" ||
		ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("Grafana's data sources %+v: want one prometheus at http://prometheus:9090", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, mounts("grafana", "/etc/grafana/provisioning/dashboards/mqtarget.yml"), &dp)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" {
		t.Fatalf("Grafana's dashboard providers %+v: want one of type file", dp.Providers)
	}
	dashboard := filepath.Join(dp.Providers[0].Options.Path, "mqtarget-dashboard.json")
	if src := mounts("grafana", dashboard); src != "./grafana/mqtarget-dashboard.json" {
		t.Errorf("Grafana's %s is %q, not deploy/grafana/mqtarget-dashboard.json", dashboard, src)
	}
}

// readYAML decodes the repository file path (relative to deploy/, as compose's volumes are).
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	if path == "" {
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := yaml.NewDecoder(f).Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
