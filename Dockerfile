# A static, non-root image of spanset: the controller and its tools in one binary, and beside it
# `spanset-guard-exec`, the first process a pod lease's guard copies into every guarded container
# (static, so that it runs in any image).
# Build: docker build --build-arg SPANSET_GIT_COMMIT=$(git rev-parse --short HEAD) -t ghcr.io/spanset/spanset:0.1.0 .
# Built with --no-default-features: the production binary has neither the sandbox (feature
# `sim`: the API simulator and the sim, sim-ctl, sandbox and drill cluster-loss commands) nor
# the crash failpoints (feature `failpoints`, which an environment variable could trigger).
FROM rust:1-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
# `.git` stays out of the build context, so `spanset version` names the commit only when it is
# passed: --build-arg SPANSET_GIT_COMMIT=$(git rev-parse --short HEAD) (else `unknown`).
ARG SPANSET_GIT_COMMIT=
RUN cargo build --release --locked --no-default-features --bin spanset --bin spanset-guard-exec \
 && cp target/release/spanset target/release/spanset-guard-exec /

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /spanset /spanset
COPY --from=build /spanset-guard-exec /spanset-guard-exec
USER 65532:65532
ENTRYPOINT ["/spanset"]
CMD ["run"]
