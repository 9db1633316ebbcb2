// Package deploy_test checks the ways the service is shipped: the OCI image scripts/image builds
// (unpacked and run from its own root filesystem until it is ready), and the Dockerfile, the
// Compose file and the Kubernetes manifest, which must say what the image says.
package deploy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
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

	"codeauth/config"
	"codeauth/server"

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
	// Every path's owner and mode, whatever the umask of the build: the image's user reads the
	// certificates (or no TLS connection works) and the users, and owns only its volume.
	for path, want := range map[string]struct {
		owner string
		mode  os.FileMode
	}{
		"codeauth": {"0:0", 0o755}, "etc": {"0:0", 0o755 | os.ModeDir}, "etc/ssl": {"0:0", 0o755 | os.ModeDir},
		"etc/ssl/certs": {"0:0", 0o755 | os.ModeDir}, "etc/ssl/certs/ca-certificates.crt": {"0:0", 0o644},
		"etc/passwd": {"0:0", 0o644}, "etc/group": {"0:0", 0o644},
		"tmp": {"0:0", 0o777 | os.ModeDir | os.ModeSticky}, "data": {"65532:65532", 0o700 | os.ModeDir},
	} {
		fi, err := os.Stat(filepath.Join(root, path))
		if err != nil {
			t.Errorf("/%s: %v", path, err)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		if owner := fmt.Sprintf("%d:%d", st.Uid, st.Gid); owner != want.owner || fi.Mode() != want.mode {
			t.Errorf("/%s is %s, owned by %s; want %s, owned by %s", path, fi.Mode(), owner, want.mode, want.owner)
		}
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
	serve.Process.Signal(syscall.SIGTERM)
	serve.Wait()
	t.Run("the Dockerfile builds the same image", func(t *testing.T) { checkDockerfile(t, cfg, root) })
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

// checkDockerfile holds the Dockerfile to the image scripts/image built (cfg, unpacked at root):
// the final stage's user, port, volume, working dir, environment, entrypoint, command, labels and
// health check are the image's settings, and it copies exactly the image's files, with their
// owners and modes. (Docker cannot run here; what it would build is read from the Dockerfile.)
func checkDockerfile(t *testing.T, cfg imageConfig, root string) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ") // continued lines
	var final []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			final = final[:0]
		}
		final = append(final, line)
	}
	if len(final) == 0 || final[0] != "FROM scratch" {
		t.Fatalf("the final stage is not FROM scratch: %q", final)
	}
	c := cfg.Config
	jsonList := func(v string) []string {
		var l []string
		if err := json.Unmarshal([]byte(v), &l); err != nil {
			t.Errorf("%q is not a JSON list", v)
		}
		return l
	}
	labels, env := map[string]string{}, map[string]bool{}
	var copies []string
	for _, line := range final[1:] {
		op, rest, _ := strings.Cut(line, " ")
		switch op {
		case "USER":
			if rest != c.User {
				t.Errorf("USER %s, the image's %s", rest, c.User)
			}
		case "WORKDIR":
			if rest != c.WorkingDir {
				t.Errorf("WORKDIR %s, the image's %s", rest, c.WorkingDir)
			}
		case "EXPOSE":
			if _, ok := c.ExposedPorts[rest+"/tcp"]; !ok || len(c.ExposedPorts) != 1 {
				t.Errorf("EXPOSE %s, the image's %v", rest, c.ExposedPorts)
			}
		case "VOLUME":
			v := jsonList(rest)
			if len(v) != len(c.Volumes) || len(v) != 1 {
				t.Errorf("VOLUME %v, the image's %v", v, c.Volumes)
			} else if _, ok := c.Volumes[v[0]]; !ok {
				t.Errorf("VOLUME %v, the image's %v", v, c.Volumes)
			}
		case "ENTRYPOINT":
			if v := jsonList(rest); !slices.Equal(v, c.Entrypoint) {
				t.Errorf("ENTRYPOINT %v, the image's %v", v, c.Entrypoint)
			}
		case "CMD":
			if v := jsonList(rest); !slices.Equal(v, c.Cmd) {
				t.Errorf("CMD %v, the image's %v", v, c.Cmd)
			}
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				env[kv] = true
			}
		case "LABEL":
			for k, v := range dockerfileWords(t, rest) {
				labels[k] = v
			}
		case "HEALTHCHECK":
			_, cmd, _ := strings.Cut(rest, " CMD ")
			if v := jsonList(cmd); !slices.Equal(v, jsonList(c.Labels["io.codeauth.healthcheck"])) {
				t.Errorf("HEALTHCHECK CMD %v, the image's label %s", v, c.Labels["io.codeauth.healthcheck"])
			}
		case "COPY":
			copies = append(copies, rest)
		case "ARG":
		default:
			t.Errorf("the final stage has %s, which the image has no counterpart for", op)
		}
	}
	for _, kv := range c.Env {
		if !env[kv] && !strings.HasPrefix(kv, "PATH=") {
			t.Errorf("ENV lacks the image's %s", kv)
		}
		delete(env, kv)
	}
	for kv := range env {
		t.Errorf("ENV %s is not the image's", kv)
	}
	// The labels made when the image is built (its version, revision, source, time) come from
	// build arguments; every other label is the image's, word for word.
	built := []string{"org.opencontainers.image.version", "org.opencontainers.image.revision", "org.opencontainers.image.source", "org.opencontainers.image.created"}
	for k, v := range c.Labels {
		got, ok := labels[k]
		switch {
		case strings.HasPrefix(k, "io.buildah."):
			// buildah's own mark of the tool that built it
		case !ok:
			t.Errorf("LABEL lacks the image's %s", k)
		case slices.Contains(built, k):
			if !strings.HasPrefix(got, "${") {
				t.Errorf("LABEL %s=%q does not come from a build argument", k, got)
			}
		case got != v:
			t.Errorf("LABEL %s=%q, the image's %q", k, got, v)
		}
		delete(labels, k)
	}
	for k := range labels {
		t.Errorf("LABEL %s is not the image's", k)
	}
	// The files: each COPY's destination is one of the image's, with its owner and mode, and the
	// image has no other.
	var leaves []string
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == root {
			return err
		}
		if entries, _ := os.ReadDir(path); !d.IsDir() || len(entries) == 0 || path == filepath.Join(root, "data") {
			leaves = append(leaves, strings.TrimPrefix(path, root))
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	var copied []string
	for _, cp := range copies {
		fields := strings.Fields(cp)
		dest := fields[len(fields)-1]
		copied = append(copied, dest)
		fi, err := os.Stat(filepath.Join(root, dest))
		if err != nil {
			t.Errorf("COPY to %s, which the image lacks", dest)
			continue
		}
		st := fi.Sys().(*syscall.Stat_t)
		owner := "0:0"
		for _, f := range fields {
			if o, ok := strings.CutPrefix(f, "--chown="); ok {
				owner = o
			}
			if m, ok := strings.CutPrefix(f, "--chmod="); ok {
				if want, _ := strconv.ParseUint(m, 8, 32); uint32(fi.Mode().Perm()) != uint32(want) {
					t.Errorf("COPY to %s with mode %s, the image's %o", dest, m, fi.Mode().Perm())
				}
			}
		}
		if got := fmt.Sprintf("%d:%d", st.Uid, st.Gid); got != owner {
			t.Errorf("COPY to %s owned by %s, the image's by %s", dest, owner, got)
		}
	}
	slices.Sort(copied)
	slices.Sort(leaves)
	if !slices.Equal(copied, leaves) {
		t.Errorf("the Dockerfile copies %v, the image holds %v", copied, leaves)
	}
	if fi, err := os.Stat(filepath.Join(root, "tmp")); err != nil || fi.Mode()&os.ModeSticky == 0 || !strings.Contains(string(b), "chmod 1777") {
		t.Errorf("/tmp is not sticky and open to all in both (1777)")
	}
	if !strings.Contains(string(b), "CGO_ENABLED=0") {
		t.Error("the Dockerfile does not build a static binary")
	}
}

// dockerfileWords reads a LABEL instruction's key=value pairs, values quoted or not, with the
// backslash escapes a double-quoted value may hold.
func dockerfileWords(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		key, rest, ok := strings.Cut(s, "=")
		if !ok {
			t.Fatalf("LABEL %q: no =", s)
		}
		var value strings.Builder
		if strings.HasPrefix(rest, `"`) {
			i := 1
			for ; i < len(rest) && rest[i] != '"'; i++ {
				if rest[i] == '\\' && i+1 < len(rest) {
					i++
				}
				value.WriteByte(rest[i])
			}
			s = rest[min(i+1, len(rest)):]
		} else {
			v, after, _ := strings.Cut(rest, " ")
			value.WriteString(v)
			s = after
		}
		out[key] = value.String()
	}
	return out
}

// The Compose file runs the image with PostgreSQL: the image's port, the health check the image
// names, a database URL that points at its own PostgreSQL service, which the service waits for,
// the secret from the environment, and no proxy believed in front of the published port.
func TestCompose_SaysWhatTheImageSays(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Image       string
			Ports       []string
			Environment map[string]string
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
	// Clients reach the published port directly: no X-Forwarded-For may be believed.
	if got := svc.Environment["AUTH_TRUSTED_PROXIES"]; got != config.NoProxy {
		t.Errorf("AUTH_TRUSTED_PROXIES %q: a client could name any address in X-Forwarded-For", got)
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
// liveness on /healthz after a startup probe that outlasts migrations, its secrets from the
// Secret it defines (whose placeholder the service refuses), /data mounted, a locked-down
// container, a shutdown that drains before it stops within the grace period, and a disruption
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
		PeriodSeconds    int `yaml:"periodSeconds"`
		FailureThreshold int `yaml:"failureThreshold"`
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
					TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
					Containers                    []struct {
						Image           string
						ImagePullPolicy string `yaml:"imagePullPolicy"`
						SecurityContext struct {
							AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
							ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
							Capabilities             struct {
								Drop, Add []string
							}
						} `yaml:"securityContext"`
						Ports []struct {
							Name          string
							ContainerPort int `yaml:"containerPort"`
						}
						Env []struct {
							Name      string
							Value     string
							ValueFrom struct {
								SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
							} `yaml:"valueFrom"`
						}
						StartupProbe   probe `yaml:"startupProbe"`
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
			Value     string
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
	// The Secret's placeholder does not start the service: nobody runs on a published key.
	vars := map[string]string{}
	for _, e := range ctr.Env {
		vars[e.Name] = e.Value
		if e.ValueFrom.SecretKeyRef.Key != "" {
			vars[e.Name] = secret.StringData[e.ValueFrom.SecretKeyRef.Key]
		}
	}
	vars["DATA_DIR"] = t.TempDir()
	if _, err := config.Load(func(k string) (string, bool) { v, ok := vars[k]; return v, ok }); err == nil || !strings.Contains(err.Error(), "AUTH_SECRET") {
		t.Errorf("the service starts with the Secret's placeholder AUTH_SECRET %q: %v", vars["AUTH_SECRET"], err)
	}
	vars["AUTH_SECRET"] = base64.StdEncoding.EncodeToString(make([]byte, 32))
	cfg, err := config.Load(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		t.Fatalf("the manifest's settings with a real secret: %v", err)
	}
	// Liveness applies only once the process listens, and migrations may take minutes first.
	if p := ctr.StartupProbe; p.HTTPGet.Path != "/healthz" || !portOK(p.HTTPGet.Port) || p.PeriodSeconds*p.FailureThreshold < 300 {
		t.Errorf("startup probe %+v: it must give migrations at least 5 minutes", p)
	}
	// SIGTERM: not ready for SHUTDOWN_DELAY, then the requests in flight finish and the outbox
	// records what it delivered, all before Kubernetes kills the container (10 s for the outbox
	// and the jobs).
	if cfg.ShutdownDelay <= 0 {
		t.Error("no SHUTDOWN_DELAY: a rolling update refuses connections")
	}
	if need := cfg.ShutdownDelay + server.ShutdownTimeout + 10*time.Second; time.Duration(pod.TerminationGracePeriodSeconds)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds %d, a shutdown may take %s", pod.TerminationGracePeriodSeconds, need)
	}
	sc := ctr.SecurityContext
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !sc.ReadOnlyRootFilesystem ||
		!slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("container security context %+v", sc)
	}
	if ctr.ImagePullPolicy != "IfNotPresent" && ctr.ImagePullPolicy != "Always" || !strings.Contains(ctr.Image, "codeauth") {
		t.Errorf("image %s, pull policy %q", ctr.Image, ctr.ImagePullPolicy)
	}
	pdb := docs["PodDisruptionBudget"]
	if len(pdb.Spec.Selector.MatchLabels) == 0 {
		t.Error("the budget's selector is empty: it selects every pod of the namespace")
	}
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
