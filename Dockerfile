# The same image as scripts/image (which builds it with buildah, without a Docker daemon): a static
# binary on an empty base, run as the user codeauth (65532), /data its volume, the same files,
# settings and labels. deploy_test checks that the two agree.
#   docker build -t codeauth --build-arg VERSION=$(git describe --always --dirty) \
#     --build-arg REVISION=$(git rev-parse HEAD) --build-arg SOURCE=https://github.com/you/codeauth \
#     --build-arg CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ) .
#   docker run -p 3000:3000 -v codeauth-data:/data -e AUTH_TRUSTED_PROXIES=none codeauth
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o /out/codeauth . \
 && mkdir -p /out/data /out/tmp && chmod 1777 /out/tmp \
 && printf 'root:x:0:0:root:/:/sbin/nologin\ncodeauth:x:65532:65532:codeauth:/data:/sbin/nologin\n' >/out/passwd \
 && printf 'root:x:0:\ncodeauth:x:65532:\n' >/out/group

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/passwd /etc/passwd
COPY --from=build /out/group /etc/group
COPY --from=build /out/tmp /tmp
COPY --from=build /out/codeauth /codeauth
COPY --from=build --chown=65532:65532 --chmod=0700 /out/data /data
ENV DATA_DIR=/data PORT=3000
USER 65532:65532
WORKDIR /data
EXPOSE 3000
VOLUME ["/data"]
ARG VERSION=dev REVISION=unknown SOURCE=unknown CREATED=unknown
LABEL org.opencontainers.image.title="codeauth" \
      org.opencontainers.image.description="Passwordless sign-in by e-mail code" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.created="${CREATED}" \
      io.codeauth.healthcheck="[\"/codeauth\",\"healthcheck\"]"
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["/codeauth", "healthcheck"]
ENTRYPOINT ["/codeauth"]
CMD ["serve"]
