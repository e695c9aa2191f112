//! `docker/Dockerfile`: the one image every instance and relay runs (a multi-stage build of the
//! `bulkhead` binary whose dependencies compile in layers of their own, or a binary built
//! beforehand), `docker/Dockerfile.proxy` for the egress proxy (squid), and the repository's
//! root `.dockerignore` ([`root_files`]), which admits into the build context exactly what the
//! image is built from, on the legacy builder and BuildKit alike. Both images run as fixed high
//! UIDs and carry a `HEALTHCHECK`.

use crate::emit::{Output, header};
use crate::model::{Model, Registry};
use crate::workspace::{Kind, Target, Workspace};
use bulkhead_vocab::workspace_layer;
use std::fmt::Write as _;
use std::path::Path;

/// The server image. `{mounts}` is replaced by the mount points compose uses: an engine creates a
/// missing mount point owned by root (the server runs as 10001), and copies an existing one's
/// owner into a fresh named volume.
const DOCKERFILE: &str = r#"# Build from the repository root (compose does): docker build -f generated/docker/Dockerfile .
# Base images are build arguments (repository and tag), so a registry mirror needs no edit here:
#   --build-arg BUILD_IMAGE=mirror.example/rust --build-arg BASE_IMAGE=mirror.example/debian
# From a binary built beforehand on Debian 12 (glibc 2.36) instead of compiling in the image:
#   cargo build --release && mkdir -p target/docker && cp target/release/bulkhead target/docker/
#   docker build -f generated/docker/Dockerfile --build-arg BUILD_IMAGE=debian \
#     --build-arg BUILD_TAG=bookworm-slim --build-arg PREBUILT_BINARY=target/docker/bulkhead .
# Behind a proxy that re-signs TLS, the image's downloads need its CA: put it (PEM) at
# target/docker/extra-ca.crt and add --build-arg EXTRA_CA_CERT=target/docker/extra-ca.crt (the
# image then trusts it, at build and at run time).
ARG BUILD_IMAGE=rust
ARG BUILD_TAG=1.95-slim
ARG BASE_IMAGE=debian
ARG BASE_TAG=bookworm-slim

FROM ${BUILD_IMAGE}:${BUILD_TAG} AS build
ARG PREBUILT_BINARY=
ARG EXTRA_CA_CERT=
WORKDIR /src
{deps}COPY . .
RUN if [ -n "$PREBUILT_BINARY" ]; then \
      install -m 0755 "$PREBUILT_BINARY" /usr/local/bin/bulkhead; \
    else \
      {touch}cargo build --locked --release --bin bulkhead \
      && install -m 0755 target/release/bulkhead /usr/local/bin/bulkhead; \
    fi \
 && mkdir -p /extra-ca \
 && if [ -n "$EXTRA_CA_CERT" ]; then install -m 0644 "$EXTRA_CA_CERT" /extra-ca/extra-ca.crt; fi

FROM ${BASE_IMAGE}:${BASE_TAG}
COPY --from=build /extra-ca/ /usr/local/share/ca-certificates/
# curl answers the healthchecks; ca-certificates lets connectors reach HTTPS hosts.{sandbox_note}
# Versions are not pinned: Debian replaces a version on its mirrors with each security update, so a
# pin breaks the build within weeks; the base image (a build argument, by digest in production)
# fixes the release, and the image's own digest is what a deployment pins.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl{packages} \
 && rm -rf /var/lib/apt/lists/* \
 && update-ca-certificates \
{upstreams} && groupadd --system --gid 10001 bulkhead \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/bulkhead --shell /usr/sbin/nologin bulkhead \
 && mkdir -p /etc/bulkhead \
{mounts} && chown -R 10001:10001 /var/lib/bulkhead /run/bulkhead
COPY --from=build /usr/local/bin/bulkhead /usr/local/bin/bulkhead
COPY config.yaml /etc/bulkhead/config.yaml
ENV BULKHEAD_STATE_DIR=/var/lib/bulkhead/state \
    BULKHEAD_WORKSPACES=/var/lib/bulkhead/workspaces
USER 10001:10001
WORKDIR /var/lib/bulkhead
EXPOSE 8000
# Compose and Kubernetes replace this per instance (port, or the Unix socket of an isolated one).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["curl", "-fsS", "--noproxy", "*", "-o", "/dev/null", "http://127.0.0.1:8000/healthz"]
ENTRYPOINT ["bulkhead"]
CMD ["--help"]
"#;

const PROXY_DOCKERFILE: &str = r#"# The egress proxy of proxied instances: Debian's squid, the same binary `bulkhead up` runs.
# Build from the repository root (compose does): docker build -f generated/docker/Dockerfile.proxy .
ARG BASE_IMAGE=debian
ARG BASE_TAG=bookworm-slim
FROM ${BASE_IMAGE}:${BASE_TAG}
# Versions are not pinned: see the note in Dockerfile.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends squid \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10002 bulkhead-proxy \
 && useradd --system --uid 10002 --gid 10002 --home-dir /nonexistent --shell /usr/sbin/nologin bulkhead-proxy \
 && printf '%s\n' \
      'http_port 3128' \
      'pid_filename none' \
      'cache_log /dev/stderr' \
      'access_log stdio:/dev/stdout' \
      'coredump_dir none' \
      'include /etc/squid/policy.conf' > /etc/squid/squid.conf
# compose mounts the generated policy (generated/proxy/<deployment>-<server>.squid.conf) here.
USER 10002:10002
EXPOSE 3128
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/3128"]
ENTRYPOINT ["/usr/sbin/squid", "-N", "-d", "1", "-f", "/etc/squid/squid.conf"]
"#;

/// Build outputs stay out of the context, but for the one place a prebuilt binary is taken from.
/// Build-argument files the context admits from `target/` (see the Dockerfile's header).
const BUILD_ARG_FILES: [&str; 2] = ["target/docker/bulkhead", "target/docker/extra-ca.crt"];

/// The dependency layers of the build stage: the manifests and the lock file, then a stub of
/// every target compiled with the real dependency graph (skipped for a prebuilt binary).
fn deps_layers(w: &Workspace) -> String {
    let mut out = String::from(
        "# Dependencies first, in layers of their own: every member's manifest, the lock file and a\n\
         # stub of every target, compiled once. A change to the sources or specs rebuilds only this\n\
         # workspace's own crates: these layers are reused while the manifests and Cargo.lock stay.\n",
    );
    for m in &w.members {
        if m.dir.is_empty() {
            out.push_str("COPY Cargo.toml Cargo.lock ./\n");
        } else {
            let _ = writeln!(out, "COPY {d}/Cargo.toml {d}/", d = m.dir);
        }
    }
    let targets: Vec<&Target> = w.members.iter().flat_map(|m| m.targets.iter()).collect();
    let mut dirs: Vec<String> = targets
        .iter()
        .filter_map(|t| Path::new(&t.path).parent())
        .map(|p| p.to_string_lossy().into_owned())
        .filter(|p| !p.is_empty())
        .collect();
    dirs.sort();
    dirs.dedup();
    let libs: Vec<&str> = targets
        .iter()
        .filter(|t| t.kind == Kind::Lib)
        .map(|t| t.path.as_str())
        .collect();
    let mains: Vec<&str> = targets
        .iter()
        .filter(|t| t.kind != Kind::Lib)
        .map(|t| t.path.as_str())
        .collect();
    out.push_str("RUN if [ -z \"$PREBUILT_BINARY\" ]; then \\\n");
    let _ = writeln!(out, "      mkdir -p {} \\", dirs.join(" "));
    let _ = writeln!(out, "      && touch {} \\", libs.join(" "));
    let _ = writeln!(
        out,
        "      && for f in {}; do echo 'fn main() {{}}' > \"$f\"; done \\",
        mains.join(" ")
    );
    out.push_str("      && cargo build --locked --release --bin bulkhead; \\\n    fi\n");
    out
}

/// The command that marks the workspace's own sources newer than the stubs' build (cargo
/// compares modification times; the context's files keep the checkout's).
fn touch_sources(w: &Workspace) -> String {
    let sources: Vec<String> = w
        .sources()
        .into_iter()
        .filter(|s| !s.ends_with("Cargo.toml"))
        .collect();
    format!(
        "find {} -type f -exec touch {{}} + \\\n      && ",
        sources.join(" ")
    )
}

/// The `@generated` header of a file made from every deployment spec.
fn deployments_header(model: &Model) -> String {
    let sources: Vec<&str> = model
        .deployments
        .iter()
        .map(|d| d.source.as_str())
        .collect();
    header("#", &sources)
}

/// Files [`root_files`] writes at the repository's root.
pub const ROOT_DOCKERIGNORE: &str = ".dockerignore";

/// The repository-root files of the image build: `.dockerignore`, an allowlist of what the build
/// reads (the workspace's manifests, lock file and sources, `specs/`, `config.yaml`, the
/// build-argument files under `target/docker/`); nothing else reaches the build context: not
/// `target/`, virtualenvs, `.bulkhead/` (local state and workspaces), `secrets/` or `.git/`.
pub fn root_files(model: &Model, out: &mut Output) {
    let Some(w) = &model.workspace else { return };
    if model.deployments.is_empty() {
        return;
    }
    let mut text = deployments_header(model);
    text.push_str(
        "# The build context of generated/docker/Dockerfile (compose builds from the repository root),\n\
         # read by the legacy builder and BuildKit alike: everything is left out but what the image is\n\
         # built from. A test builds a context after the README's first hour and lists what arrives.\n\
         *\n",
    );
    let mut admitted: Vec<String> = w.sources();
    admitted.extend(["Cargo.lock", "config.yaml", "specs"].map(String::from));
    admitted.extend(BUILD_ARG_FILES.map(String::from));
    admitted.sort();
    admitted.dedup();
    for a in admitted {
        let _ = writeln!(text, "!{a}");
    }
    text.push_str("# Half-written files of the generator and editors.\n**/*.tmp~\n**/.*.swp\n");
    out.add(ROOT_DOCKERIGNORE, text);
}

/// Where the image installs upstream MCP servers, one folder per connector.
pub const UPSTREAMS_DIR: &str = "/opt/bulkhead/upstreams";

/// The build commands that install every upstream's pinned package (each in a folder of its
/// own, downloads checked against the system's CA bundle) and put its program on `PATH`; the
/// build fails when the package does not provide the program the spec starts.
fn upstream_installs(upstreams: &[super::Upstream]) -> String {
    let mut out = String::new();
    for u in upstreams {
        let Some(p) = &u.package else { continue };
        let dir = format!("{UPSTREAMS_DIR}/{}", u.connector);
        let bin = match p.registry {
            Registry::Pypi => {
                out.push_str(&format!(
                    " && python3 -m venv {dir} \\\n && PIP_CERT=/etc/ssl/certs/ca-certificates.crt {dir}/bin/pip install --no-cache-dir --disable-pip-version-check --no-input '{}=={}' \\\n",
                    p.name, p.version
                ));
                format!("{dir}/bin")
            }
            Registry::Npm => {
                out.push_str(&format!(
                    " && mkdir -p {dir} \\\n && NPM_CONFIG_CAFILE=/etc/ssl/certs/ca-certificates.crt npm install --prefix {dir} --omit=dev --no-audit --no-fund --save-exact '{}@{}' \\\n && npm cache clean --force \\\n",
                    p.name, p.version
                ));
                format!("{dir}/node_modules/.bin")
            }
        };
        // The spec starts its program by name: the package must provide it, and no other
        // program of that name may be on PATH (it would shadow a system program, or another
        // upstream's).
        if crate::vars::is_program_name(&u.program) {
            out.push_str(&format!(
                " && test -x '{bin}/{prog}' \\\n && if command -v '{prog}' >/dev/null; then echo 'upstream program {prog} of {c} is already on PATH' >&2; exit 1; fi \\\n && ln -s '{bin}/{prog}' '/usr/local/bin/{prog}' \\\n",
                prog = u.program,
                c = u.connector
            ));
        }
    }
    out
}

/// Every mount point compose uses, sorted: state, data, the socket folder and each deployed
/// server's workspace layers.
fn mount_points(model: &Model) -> Vec<String> {
    let mut dirs = vec![
        super::STATE_DIR.to_string(),
        super::DATA_DIR.to_string(),
        super::SOCKET_DIR.to_string(),
        super::WORKSPACES_DIR.to_string(),
    ];
    for d in &model.deployments {
        for p in super::plan(model, d) {
            for i in &p.instances {
                dirs.push(format!(
                    "{}/{}",
                    super::WORKSPACES_DIR,
                    workspace_layer(&p.server.name, i.mode)
                ));
            }
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

/// Adds the Dockerfile (and its ignore file) when the model has deployments.
pub fn emit(model: &Model, out: &mut Output) {
    if model.deployments.is_empty() {
        return;
    }
    let mut text = deployments_header(model);
    let mounts: String = mount_points(model)
        .iter()
        .map(|d| format!(" && mkdir -p {d} \\\n"))
        .collect();
    let plans: Vec<_> = model
        .deployments
        .iter()
        .flat_map(|d| super::plan(model, d))
        .collect();
    let code = plans.iter().any(|p| p.code);
    let jails = plans.iter().any(|p| p.sandbox);
    let mut upstreams: Vec<super::Upstream> = plans
        .iter()
        .flat_map(|p| p.upstreams.iter().cloned())
        .collect();
    upstreams.sort_by(|a, b| a.connector.cmp(&b.connector));
    upstreams.dedup_by(|a, b| a.connector == b.connector);
    let registries: Vec<Registry> = upstreams
        .iter()
        .filter_map(|u| u.package.as_ref().map(|p| p.registry))
        .collect();
    let mut note = String::new();
    let mut packages = String::new();
    if jails {
        note.push_str("\n# bubblewrap: the jail of the code sandbox and of upstream MCP servers.");
        packages.push_str(" bubblewrap");
    }
    if code {
        note.push_str("\n# python3: the interpreter the code sandbox runs.");
    }
    if code || registries.contains(&Registry::Pypi) {
        packages.push_str(" python3");
    }
    if registries.contains(&Registry::Pypi) {
        note.push_str("\n# python3-venv: upstream MCP servers from PyPI, each in a virtualenv.");
        packages.push_str(" python3-venv");
    }
    if registries.contains(&Registry::Npm) {
        note.push_str("\n# nodejs and npm: upstream MCP servers from the npm registry.");
        packages.push_str(" nodejs npm");
    }
    if !upstreams.is_empty() {
        note.push_str("\n# Upstream MCP servers are installed here at the exact versions their locks pin\n# (specs/connectors/*.lock.json): nothing is downloaded at run time.");
    }
    let (deps, touch) = match &model.workspace {
        Some(w) => (deps_layers(w), touch_sources(w)),
        None => (String::new(), String::new()),
    };
    text.push_str(
        &DOCKERFILE
            .replace("{deps}", &deps)
            .replace("{touch}", &touch)
            .replace("{mounts}", &mounts)
            .replace("{sandbox_note}", &note)
            .replace("{packages}", &packages)
            .replace("{upstreams}", &upstream_installs(&upstreams)),
    );
    out.add("docker/Dockerfile", text);
    let mut proxy = deployments_header(model);
    proxy.push_str(PROXY_DOCKERFILE);
    out.add("docker/Dockerfile.proxy", proxy);
}
