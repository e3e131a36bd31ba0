# Builds the kmirror binary into a small runtime image.
#   docker build --build-arg VERSION=$(git describe --always --dirty) -t kmirror .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The version is what `kmirror version` and GET /v1/instances show.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=${VERSION}" -o /out/kmirror ./cmd/kmirror

FROM debian:bookworm-slim
# TLS to a cluster signed by a public CA needs the system's roots.
# /var/lib/kmirror is the secret key's home (KMIRROR_SECRET_KEY_FILE). An empty
# named volume mounted there takes this directory's owner, so kmirror can
# write the key into it (docker-compose.yml's secret-key service).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 kmirror \
    && install -d -o kmirror -g kmirror -m 700 /var/lib/kmirror
COPY --from=build /out/kmirror /usr/local/bin/kmirror
USER kmirror
# Reachable through `docker run -p`. Without API tokens (KMIRROR_API_TOKENS_FILE
# or KMIRROR_API_TOKEN) the server refuses to start on this address.
ENV KMIRROR_LISTEN=0.0.0.0:8080
EXPOSE 8080
# Six failed checks in a row (a minute) before unhealthy: a first start
# migrates the database before it serves.
HEALTHCHECK --interval=10s --timeout=5s --retries=6 \
    CMD ["/usr/local/bin/kmirror", "health"]
ENTRYPOINT ["/usr/local/bin/kmirror"]
CMD ["server"]
