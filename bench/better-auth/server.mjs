// A stock better-auth server (the exact version in ../../package.json) configured like codeauth's
// seed, for cmd/loadtest's `-mode flow`: e-mail OTP sign-in that signs up unknown addresses, bearer
// sessions (set-auth-token), a JWT on get-session (set-auth-jwt), PostgreSQL through `pg`.
// better-auth is used as a library only; nothing of its source is copied here. See README.md.
//
// Environment (the names codeauth reads work too, so one -env string can serve both servers):
//   PORT                 port to listen on (default 3000), on 127.0.0.1 unless HOST is set
//   DATABASE_URL         postgres://… (required)
//   BETTER_AUTH_SECRET   or AUTH_SECRET: the signing secret (required)
//   BETTER_AUTH_URL      or AUTH_URL: the base URL (default http://127.0.0.1:$PORT)
//   BA_RATE_LIMIT        "on" (default: per-IP limits as codeauth's, in memory) or "off"
//   BA_PG_POOL_MAX       most connections to PostgreSQL (default 32, codeauth's pool size)
//   BA_LOG_SQL           "1": print every SQL statement to stderr (for counting, not for load runs)
//   LOG_LEVEL            better-auth's log level (default warn); its logs go to stderr
//
// stdout carries only the console mailer's lines, which cmd/loadtest reads:
//   mail kind=sign-in-code to=<email> code=<otp>
import http from "node:http";
import pg from "pg";
import { betterAuth } from "better-auth";
import { bearer, emailOTP, jwt } from "better-auth/plugins";
import { toNodeHandler } from "better-auth/node";
import { getMigrations } from "better-auth/db/migration";

const env = process.env;
const fail = (msg) => {
  process.stderr.write(`better-auth bench server: ${msg}\n`);
  process.exit(1);
};

const port = Number(env.PORT || 3000);
const host = env.HOST || "127.0.0.1";
const databaseURL = env.DATABASE_URL || fail("DATABASE_URL is required");
const secret = env.BETTER_AUTH_SECRET || env.AUTH_SECRET || fail("BETTER_AUTH_SECRET (or AUTH_SECRET) is required");
const baseURL = env.BETTER_AUTH_URL || env.AUTH_URL || `http://127.0.0.1:${port}`;
const origin = new URL(baseURL).origin;
const rateLimitOn = (env.BA_RATE_LIMIT || "on") !== "off";

const pool = new pg.Pool({ connectionString: databaseURL, max: Number(env.BA_PG_POOL_MAX || 32) });
pool.on("error", (err) => process.stderr.write(`pg pool: ${err.message}\n`));
if (env.BA_LOG_SQL === "1") {
  pool.on("connect", (client) => {
    const query = client.query.bind(client);
    client.query = (...args) => {
      const text = typeof args[0] === "string" ? args[0] : args[0]?.text;
      process.stderr.write(`sql ${text}\n`);
      return query(...args);
    };
  });
}

// The console mailer, as codeauth's without EMAIL_PROVIDER_API_KEY. process.stdout is synchronous
// on Linux for pipes and files, so the line is out before the send's response.
function printMail(kind, to, code) {
  process.stdout.write(`mail kind=${kind} to=${to} code=${code}\n`);
}

const options = {
  appName: "codeauth-bench",
  baseURL,
  basePath: "/api/auth",
  secret,
  database: pool,
  telemetry: { enabled: false },
  logger: {
    level: env.LOG_LEVEL || "warn",
    log: (level, message, ...args) => process.stderr.write(`[better-auth ${level}] ${message} ${args.map(String).join(" ")}\n`),
  },
  // Passwordless only (seed: password sign-in, sign-up and reset are disabled).
  emailAndPassword: { enabled: false },
  trustedOrigins: [
    origin,
    "capacitor://localhost",
    "ionic://localhost",
    "http://localhost",
    ...(env.AUTH_TRUSTED_ORIGINS || "").split(",").map((s) => s.trim()).filter(Boolean),
  ],
  // Seed: 60-day sessions, refreshed after a day, a 300 s cookie cache.
  session: {
    expiresIn: 60 * 24 * 3600,
    updateAge: 24 * 3600,
    cookieCache: { enabled: true, maxAge: 300 },
  },
  // codeauth's per-IP limits (CONTRACT.md "Limits"), in memory, the IP from a single-address
  // X-Forwarded-For, else X-Real-IP. cmd/loadtest sends each request from its own address, so
  // they stay on without limiting the run, as in scripts/bench.
  rateLimit: {
    enabled: rateLimitOn,
    storage: "memory",
    window: 60,
    max: 100,
    customRules: {
      "/email-otp/send-verification-otp": { window: 60, max: 20 },
      "/sign-in/email-otp": { window: 60, max: 30 },
    },
  },
  advanced: {
    cookiePrefix: "auth",
    ipAddress: { ipAddressHeaders: ["x-forwarded-for", "x-real-ip"] },
    // codeauth's ids are UUIDs; with PostgreSQL this makes the id columns `uuid`.
    database: { generateId: "uuid" },
  },
  plugins: [
    emailOTP({
      // Seed: 6 digits, valid 600 s, 5 attempts; sign-in signs up unknown addresses.
      otpLength: 6,
      expiresIn: 600,
      allowedAttempts: 5,
      disableSignUp: false,
      // codeauth keeps a keyed hash of the code; "hashed" is better-auth's SHA-256 of it.
      storeOTP: "hashed",
      async sendVerificationOTP({ email, otp, type }) {
        printMail(type === "sign-in" ? "sign-in-code" : `${type}-code`, email, otp);
      },
    }),
    bearer(),
    jwt({
      // codeauth: EdDSA (Ed25519), iss and aud the base URL's origin, 15 minutes.
      jwks: { keyPairConfig: { alg: "EdDSA", crv: "Ed25519" } },
      jwt: { issuer: origin, audience: origin, expirationTime: "15m" },
    }),
  ],
};

// The schema, with better-auth's own migration tooling: creates what is missing, so one command
// works on a fresh database and a second start changes nothing.
const { toBeCreated, toBeAdded, runMigrations } = await getMigrations(options);
if (toBeCreated.length || toBeAdded.length) {
  process.stderr.write(
    `better-auth bench server: migrating (create ${toBeCreated.map((t) => t.table).join(", ") || "-"}; add columns to ${toBeAdded.map((t) => t.table).join(", ") || "-"})\n`,
  );
  await runMigrations();
}

const auth = betterAuth(options);
const authHandler = toNodeHandler(auth);

// The first JWT would create the signing key; create it now (GET /jwks does when none exists), so
// that concurrent first get-sessions do not each make one and the measured path is the warm one.
// (A server-side call: it does not go through the per-IP limiter.)
{
  const { keys } = await auth.api.getJwks();
  if (!keys?.length) fail("no signing key after GET /jwks");
}

const server = http.createServer((req, res) => {
  if (req.url === "/readyz" && (req.method === "GET" || req.method === "HEAD")) {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end("ok\n");
    return;
  }
  authHandler(req, res);
});
server.keepAliveTimeout = 65_000;
server.listen(port, host, () => {
  process.stderr.write(
    `better-auth bench server: listening on ${host}:${port}, baseURL ${baseURL}, rate limit ${rateLimitOn ? "on" : "off"}, pid ${process.pid}\n`,
  );
});

let stopping = false;
function stop() {
  if (stopping) return;
  stopping = true;
  server.close();
  server.closeAllConnections?.();
  pool.end().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 3000).unref();
}
process.on("SIGINT", stop);
process.on("SIGTERM", stop);
