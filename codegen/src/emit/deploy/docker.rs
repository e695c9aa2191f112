//! `docker/Dockerfile`: the one image every instance runs (a multi-stage build of the
//! `bulkhead` binary), and `docker/Dockerfile.dockerignore` to keep build outputs out of the
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
 && mkdir -p /var/lib/bulkhead/state /var/lib/bulkhead/workspaces /etc/bulkhead \
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
    let mut ignore = header("#", &sources);
    ignore.push_str(DOCKERIGNORE);
    out.add("docker/Dockerfile.dockerignore", ignore);
}
