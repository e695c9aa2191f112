//! `docker/Dockerfile`: the one image every instance runs (a multi-stage build of the
//! `bulkhead` binary), `docker/Dockerfile.proxy` for the egress proxy (squid), and `docker/Dockerfile.dockerignore` to keep build outputs out of the
//! build context.

use crate::emit::{Output, header};
use crate::model::Model;

const DOCKERFILE: &str = r#"# Build from the repository root (compose does): docker build -f generated/docker/Dockerfile .
FROM rust:1.95-slim AS build
WORKDIR /src
COPY . .
RUN cargo build --locked --release --bin bulkhead \
 && install -m 0755 target/release/bulkhead /usr/local/bin/bulkhead

FROM debian:bookworm-slim
# curl answers the compose healthchecks; ca-certificates lets connectors reach HTTPS hosts.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/bulkhead --shell /usr/sbin/nologin bulkhead \
 && mkdir -p /var/lib/bulkhead/state /var/lib/bulkhead/workspaces /var/lib/bulkhead/data /etc/bulkhead \
 && chown -R bulkhead:bulkhead /var/lib/bulkhead
COPY --from=build /usr/local/bin/bulkhead /usr/local/bin/bulkhead
COPY config.yaml /etc/bulkhead/config.yaml
ENV BULKHEAD_STATE_DIR=/var/lib/bulkhead/state \
    BULKHEAD_WORKSPACES=/var/lib/bulkhead/workspaces
USER bulkhead:bulkhead
WORKDIR /var/lib/bulkhead
EXPOSE 8000
ENTRYPOINT ["bulkhead"]
CMD ["--help"]
"#;

const PROXY_DOCKERFILE: &str = r#"# The egress proxy of proxied instances: Debian's squid, the same binary `bulkhead up` runs.
# Build from the repository root (compose does): docker build -f generated/docker/Dockerfile.proxy .
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends squid \
 && rm -rf /var/lib/apt/lists/* \
 && printf '%s\n' \
      'http_port 3128' \
      'pid_filename none' \
      'cache_log /dev/stderr' \
      'access_log stdio:/dev/stdout' \
      'coredump_dir none' \
      'include /etc/squid/policy.conf' > /etc/squid/squid.conf
# compose mounts the generated policy (generated/proxy/<deployment>-<server>.squid.conf) here.
USER proxy:proxy
EXPOSE 3128
ENTRYPOINT ["/usr/sbin/squid", "-N", "-d", "1", "-f", "/etc/squid/squid.conf"]
"#;

const DOCKERIGNORE: &str = "target/\n.git/\n.bulkhead/\n**/*.tmp~\n";

/// Adds the Dockerfile (and its ignore file) when the model has deployments.
pub fn emit(model: &Model, out: &mut Output) {
    if model.deployments.is_empty() {
        return;
    }
    let sources: Vec<&str> = model
        .deployments
        .iter()
        .map(|d| d.source.as_str())
        .collect();
    let mut text = header("#", &sources);
    text.push_str(DOCKERFILE);
    out.add("docker/Dockerfile", text);
    let mut proxy = header("#", &sources);
    proxy.push_str(PROXY_DOCKERFILE);
    out.add("docker/Dockerfile.proxy", proxy);
    let mut ignore = header("#", &sources);
    ignore.push_str(DOCKERIGNORE);
    out.add("docker/Dockerfile.dockerignore", ignore);
}
