// Package deploy_test checks the ways the service is shipped: the OCI image scripts/image builds
// (unpacked and run from its own root filesystem until it is ready), and the Dockerfile, the
// Compose file and the Kubernetes manifest, which must say what the image says.
package deploy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// imageConfig is the part of an OCI image configuration the deployments must agree with.
type imageConfig struct {
	Config struct {
		User         string
		ExposedPorts map[string]struct{}
		Env          []string
		Entrypoint   []string
		Cmd          []string
		WorkingDir   string
		Volumes      map[string]struct{}
		Labels       map[string]string
	} `json:"config"`
}

// The image's settings, which every deployment below must repeat.
const (
	imageUser = "65532:65532"
	imagePort = "3000"
	imageData = "/data"
)

// imageHealthcheck is the health check command the image's label names.
var imageHealthcheck = []string{"/codeauth", "healthcheck"}

// requireRoot skips where the test cannot chroot, but never under CI, which runs as root.
func requireRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("running the image's root filesystem needs root (chroot), and CI=true requires it")
		}
		t.Skip("running the image's root filesystem needs root (chroot)")
	}
}

// The image built by scripts/image: from scratch, run as a non-root user, /data its volume, the
// static binary as its entrypoint. Unpacked, its entrypoint runs from its own root filesystem
// (chroot, as the image's user) with nothing configured, until /readyz answers; its health check
// command says so too.
func TestImage_RunsFromItsRootFilesystem(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	archive := filepath.Join(dir, "image.tar")
	build := exec.Command("../scripts/image")
	build.Env = append(os.Environ(), "OUT="+archive, "KEEP=false", "TAG=codeauth:deploy-test-"+strconv.Itoa(os.Getpid()))
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image: %v\n%s", err, out)
	}
	root := filepath.Join(dir, "root")
	cfg := unpackOCI(t, archive, root)

	c := cfg.Config
	if c.User != imageUser || !slices.Equal(c.Entrypoint, []string{"/codeauth"}) || !slices.Equal(c.Cmd, []string{"serve"}) ||
		c.WorkingDir != imageData {
		t.Fatalf("user %q, entrypoint %v, cmd %v, working dir %q", c.User, c.Entrypoint, c.Cmd, c.WorkingDir)
	}
	if _, ok := c.ExposedPorts[imagePort+"/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Fatalf("exposed ports %v", c.ExposedPorts)
	}
	if _, ok := c.Volumes[imageData]; !ok || len(c.Volumes) != 1 {
		t.Fatalf("volumes %v", c.Volumes)
	}
	if !slices.Contains(c.Env, "DATA_DIR="+imageData) || !slices.Contains(c.Env, "PORT="+imagePort) {
		t.Fatalf("env %v", c.Env)
	}
	for _, label := range []string{"org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.source", "org.opencontainers.image.created"} {
		if c.Labels[label] == "" {
			t.Errorf("label %s is missing", label)
		}
	}
	var hc []string
	if err := json.Unmarshal([]byte(c.Labels["io.codeauth.healthcheck"]), &hc); err != nil || !slices.Equal(hc, imageHealthcheck) {
		t.Fatalf("healthcheck label %q", c.Labels["io.codeauth.healthcheck"])
	}
	// Nothing but the binary, its certificates, users and folders: no shell to exec into.
	for _, path := range []string{"codeauth", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/group", "data", "tmp"} {
		if _, err := os.Stat(filepath.Join(root, path)); err != nil {
			t.Errorf("the image lacks /%s", path)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "bin/sh")); err == nil {
		t.Error("the image has a shell")
	}
	if fi, err := os.Stat(filepath.Join(root, "data")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 65532 {
		t.Fatalf("/data is not the image user's: %v", err)
	}

	// Run it as a container runtime would: chrooted into the unpacked image, as its user, with
	// its environment and working dir, on a free port.
	port := freePort(t)
	env := append(slices.Clone(c.Env), "PORT="+port)
	run := func(args ...string) *exec.Cmd {
		cmd := exec.Command(c.Entrypoint[0], args...)
		cmd.Env = env
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		return cmd
	}
	// exec resolves the entrypoint before the chroot: give it the path inside the image's root.
	serve := run(c.Cmd...)
	serve.Path = c.Entrypoint[0]
	var logs bytes.Buffer
	serve.Stdout, serve.Stderr = &logs, &logs
	if err := serve.Start(); err != nil {
		t.Fatalf("starting the image's entrypoint: %v", err)
	}
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM)
		_ = serve.Wait()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:" + port + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image's service was not ready in 30 s:\n%s", logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	check := run(hc[1:]...)
	check.Path = hc[0]
	if out, err := check.CombinedOutput(); err != nil || !strings.Contains(string(out), "ready") {
		t.Fatalf("the health check in the image: %v %s", err, out)
	}
	// The embedded database and the generated secret are in the volume, written as the user.
	entries, _ := os.ReadDir(filepath.Join(root, "data"))
	if len(entries) == 0 {
		t.Fatalf("nothing written to /data:\n%s", logs.String())
	}
}

// unpackOCI unpacks the OCI archive's image into root (layers in order, owners kept) and returns
// its configuration.
func unpackOCI(t *testing.T, archive, root string) imageConfig {
	t.Helper()
	blobs := map[string][]byte{}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			blobs[strings.TrimPrefix(h.Name, "./")] = b
		}
	}
	blob := func(digest string) []byte {
		b, ok := blobs["blobs/"+strings.Replace(digest, ":", "/", 1)]
		if !ok {
			t.Fatalf("the archive lacks blob %s", digest)
		}
		return b
	}
	var index struct{ Manifests []struct{ Digest string } }
	if err := json.Unmarshal(blobs["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, blobs["index.json"])
	}
	var manifest struct {
		Config struct{ Digest string }
		Layers []struct{ Digest, MediaType string }
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil {
		t.Fatal(err)
	}
	var cfg imageConfig
	if err := json.Unmarshal(blob(manifest.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, layer := range manifest.Layers {
		var r io.Reader = bytes.NewReader(blob(layer.Digest))
		if strings.HasSuffix(layer.MediaType, "+gzip") {
			gz, err := gzip.NewReader(r)
			if err != nil {
				t.Fatal(err)
			}
			r = gz
		}
		untar(t, r, root)
	}
	return cfg
}

// untar writes a layer's files, folders and links under root, with their modes and owners.
func untar(t *testing.T, r io.Reader, root string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
				var out *os.File
				if out, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
					_, err = io.Copy(out, tr)
					out.Close()
				}
			}
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, path)
		default:
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeSymlink {
			if err := os.Chmod(path, os.FileMode(h.Mode)&os.ModePerm|modeBits(h.Mode)); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(path, h.Uid, h.Gid); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// modeBits is the sticky, setuid and setgid bits of a tar header's mode, as Go's file mode.
func modeBits(mode int64) os.FileMode {
	var m os.FileMode
	if mode&01000 != 0 {
		m |= os.ModeSticky
	}
	return m
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// The Dockerfile builds the same image: its user, port, volume, working dir, environment,
// entrypoint, command and health check are the image's.
func TestDockerfile_SaysWhatTheImageSays(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var final bool
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if fields[0] == "FROM" {
			final = fields[1] == "scratch"
		}
		if final {
			got[fields[0]] = strings.TrimSpace(strings.TrimPrefix(line, fields[0]))
		}
	}
	want := map[string]string{
		"USER": imageUser, "EXPOSE": imagePort, "VOLUME": `["` + imageData + `"]`, "WORKDIR": imageData,
		"ENTRYPOINT": `["/codeauth"]`, "CMD": `["serve"]`, "ENV": "DATA_DIR=" + imageData + " PORT=" + imagePort,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s %q, want %q", k, got[k], v)
		}
	}
	if hc := got["HEALTHCHECK"]; !strings.HasSuffix(hc, `CMD ["/codeauth", "healthcheck"]`) {
		t.Errorf("HEALTHCHECK %q", hc)
	}
	if !strings.Contains(string(b), `CGO_ENABLED=0`) || !strings.Contains(string(b), "--chown=65532:65532") {
		t.Error("the Dockerfile does not build a static binary or give /data to the image's user")
	}
}

// The Compose file runs the image with PostgreSQL: the image's port and volume, the health check
// the image names, a database URL that points at its own PostgreSQL service, which the service
// waits for.
func TestCompose_SaysWhatTheImageSays(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Image       string
			Ports       []string
			Environment map[string]string
			Volumes     []string
			Healthcheck struct{ Test []string }
			DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
		}
		Volumes map[string]any
	}
	readYAML(t, "compose.yaml", &compose)
	svc, ok := compose.Services["codeauth"]
	if !ok {
		t.Fatal("no codeauth service")
	}
	if !slices.Contains(svc.Ports, imagePort+":"+imagePort) {
		t.Errorf("ports %v", svc.Ports)
	}
	if !slices.ContainsFunc(svc.Volumes, func(v string) bool { return strings.HasSuffix(v, ":"+imageData) }) {
		t.Errorf("volumes %v: nothing on %s", svc.Volumes, imageData)
	}
	if !slices.Equal(svc.Healthcheck.Test, append([]string{"CMD"}, imageHealthcheck...)) {
		t.Errorf("healthcheck %v", svc.Healthcheck.Test)
	}
	db := svc.Environment["DATABASE_URL"]
	if _, ok := compose.Services["postgres"]; !ok || !strings.Contains(db, "@postgres:5432/") || svc.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("DATABASE_URL %q, depends on %v", db, svc.DependsOn)
	}
	if !strings.Contains(svc.Environment["AUTH_SECRET"], "?") {
		t.Errorf("AUTH_SECRET %q is not required from the environment", svc.Environment["AUTH_SECRET"])
	}
}

// The Kubernetes manifest runs the image as its user, on its port, with readiness on /readyz and
// liveness on /healthz, its secrets from the Secret it defines, /data mounted, and a disruption
// budget that selects the Deployment's pods.
func TestKubernetes_SaysWhatTheImageSays(t *testing.T) {
	b, err := os.ReadFile("kubernetes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type probe struct {
		HTTPGet struct {
			Path string
			Port any
		} `yaml:"httpGet"`
	}
	type doc struct {
		Kind     string
		Metadata struct {
			Name   string
			Labels map[string]string
		}
		StringData map[string]string `yaml:"stringData"`
		Spec       struct {
			Replicas     int
			MinAvailable int `yaml:"minAvailable"`
			Selector     struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			}
			Template struct {
				Metadata struct{ Labels map[string]string }
				Spec     struct {
					SecurityContext struct {
						RunAsNonRoot bool `yaml:"runAsNonRoot"`
						RunAsUser    int  `yaml:"runAsUser"`
						RunAsGroup   int  `yaml:"runAsGroup"`
					} `yaml:"securityContext"`
					Containers []struct {
						Ports []struct {
							Name          string
							ContainerPort int `yaml:"containerPort"`
						}
						Env []struct {
							Name      string
							ValueFrom struct {
								SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
							} `yaml:"valueFrom"`
						}
						ReadinessProbe probe `yaml:"readinessProbe"`
						LivenessProbe  probe `yaml:"livenessProbe"`
						VolumeMounts   []struct {
							MountPath string `yaml:"mountPath"`
						} `yaml:"volumeMounts"`
					}
				}
			}
		}
	}
	docs := map[string]doc{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d doc
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		docs[d.Kind] = d
	}
	for _, kind := range []string{"Secret", "Deployment", "Service", "PodDisruptionBudget"} {
		if _, ok := docs[kind]; !ok {
			t.Fatalf("no %s", kind)
		}
	}
	dep := docs["Deployment"]
	pod := dep.Spec.Template.Spec
	if user := fmt.Sprintf("%d:%d", pod.SecurityContext.RunAsUser, pod.SecurityContext.RunAsGroup); !pod.SecurityContext.RunAsNonRoot || user != imageUser {
		t.Errorf("runs as %s (non-root %v), the image as %s", user, pod.SecurityContext.RunAsNonRoot, imageUser)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if len(ctr.Ports) != 1 || strconv.Itoa(ctr.Ports[0].ContainerPort) != imagePort {
		t.Errorf("ports %+v", ctr.Ports)
	}
	portOK := func(p any) bool { return p == ctr.Ports[0].Name || fmt.Sprint(p) == imagePort }
	if ctr.ReadinessProbe.HTTPGet.Path != "/readyz" || !portOK(ctr.ReadinessProbe.HTTPGet.Port) ||
		ctr.LivenessProbe.HTTPGet.Path != "/healthz" || !portOK(ctr.LivenessProbe.HTTPGet.Port) {
		t.Errorf("readiness %+v, liveness %+v", ctr.ReadinessProbe, ctr.LivenessProbe)
	}
	secret := docs["Secret"]
	for _, name := range []string{"AUTH_SECRET", "DATABASE_URL"} {
		i := slices.IndexFunc(ctr.Env, func(e struct {
			Name      string
			ValueFrom struct {
				SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
			} `yaml:"valueFrom"`
		}) bool {
			return e.Name == name
		})
		if i < 0 {
			t.Errorf("%s is not set", name)
			continue
		}
		ref := ctr.Env[i].ValueFrom.SecretKeyRef
		if ref.Name != secret.Metadata.Name || secret.StringData[ref.Key] == "" {
			t.Errorf("%s comes from %+v, not from the Secret %q", name, ref, secret.Metadata.Name)
		}
	}
	if !slices.ContainsFunc(ctr.VolumeMounts, func(m struct {
		MountPath string `yaml:"mountPath"`
	}) bool {
		return m.MountPath == imageData
	}) {
		t.Errorf("nothing mounted on %s", imageData)
	}
	pdb := docs["PodDisruptionBudget"]
	if pdb.Spec.MinAvailable < 1 || pdb.Spec.MinAvailable >= dep.Spec.Replicas {
		t.Errorf("the budget keeps %d of %d replicas", pdb.Spec.MinAvailable, dep.Spec.Replicas)
	}
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if dep.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("the budget selects %s=%s, which the pods do not carry", k, v)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
