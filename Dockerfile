# Builds the kmirror binary into a small runtime image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/kmirror ./cmd/kmirror

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 kmirror
COPY --from=build /out/kmirror /usr/local/bin/kmirror
USER kmirror
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/kmirror"]
CMD ["server"]
