package main

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The upstream e2e nginx images (the storage suites' exec-on-volume specs, and many sig-node, network and apps
// specs) are the official nginx image: nginx serving /usr/share/nginx/html on port 80 in the foreground, its
// worker processes as user nginx (101), the logs on the container's stdout and stderr.
func init() {
	served["nginx"] = []string{"e2e-test-images/nginx:1.27.0-2", "e2e-test-images/nginx:1.28.0-2"}
}

const nginxConf = `user  nginx;
worker_processes  auto;
error_log  /var/log/nginx/error.log notice;
pid        /run/nginx.pid;
events {
    worker_connections  1024;
}
http {
    include       /etc/nginx/mime.types;
    default_type  application/octet-stream;
    access_log  /var/log/nginx/access.log;
    sendfile        on;
    keepalive_timeout  65;
    include /etc/nginx/conf.d/*.conf;
}
`

const nginxDefaultServer = `server {
    listen       80;
    server_name  localhost;
    location / {
        root   /usr/share/nginx/html;
        index  index.html index.htm;
    }
}
`

const nginxIndex = `<!DOCTYPE html>
<html>
<head><title>Welcome to nginx!</title></head>
<body><h1>Welcome to nginx!</h1></body>
</html>
`

// nginxImage is Debian's nginx binary (nginx and nginx-mime.types in the e2e binaries' folder, from
// build-testbins.sh e2e) with its libraries and the official image's configuration, on the busybox tree.
func nginxImage(root []entry, e2eBin string) (*ociImage, error) {
	files, err := hostBinary(filepath.Join(e2eBin, "nginx"), "usr/sbin/nginx")
	if err != nil {
		return nil, err
	}
	mime, err := os.ReadFile(filepath.Join(e2eBin, "nginx-mime.types"))
	if err != nil {
		return nil, err
	}
	files = append(files,
		dir("etc/nginx", 0o755), dir("etc/nginx/conf.d", 0o755),
		file("etc/nginx/nginx.conf", 0o644, []byte(nginxConf)),
		file("etc/nginx/conf.d/default.conf", 0o644, []byte(nginxDefaultServer)),
		file("etc/nginx/mime.types", 0o644, mime),
		dir("usr/share/nginx", 0o755), dir("usr/share/nginx/html", 0o755),
		file("usr/share/nginx/html/index.html", 0o644, []byte(nginxIndex)),
		// Debian's build keeps its temporary files under /var/lib/nginx.
		dir("var/lib/nginx", 0o755), dir("var/cache/nginx", 0o755), dir("run", 0o755),
		dir("var/log", 0o755), dir("var/log/nginx", 0o755),
		symlink("var/log/nginx/access.log", "/dev/stdout"), symlink("var/log/nginx/error.log", "/dev/stderr"),
		file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n"+
			"nginx:x:101:101:nginx user:/nonexistent:/bin/false\n")),
		file("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\nnginx:x:101:\n")),
	)
	img, err := image(merge(root, files), v1.Config{
		Cmd: []string{"nginx", "-g", "daemon off;"}, Env: []string{defaultPath},
		ExposedPorts: map[string]struct{}{"80/tcp": {}}, StopSignal: "SIGQUIT",
	})
	if err != nil {
		return nil, fmt.Errorf("nginx: %w", err)
	}
	return img, nil
}
