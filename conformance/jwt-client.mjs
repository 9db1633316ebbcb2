// Drives a running service with better-auth's own client and its jwt plugin (jwtClient), as an
// app that hands JWTs to its other back ends does, and verifies those JWTs the way such a back
// end would: with the stock `jose` library and our JWKS alone, never calling get-session.
//
// Usage: [AUTH_URL=<the service's AUTH_URL>] node conformance/jwt-client.mjs <base URL> <console log file>
// The console log file is the service's stdout, where the console mailer writes the codes.
import assert from "node:assert/strict";
import { args, checks, codes, expectFailure } from "./lib/harness.mjs";
import { createAuthClient } from "better-auth/client";
import { emailOTPClient, jwtClient } from "better-auth/client/plugins";
import { createLocalJWKSet, createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from "jose";

const { baseURL, consoleLog } = args("jwt-client.mjs");
// The issuer and audience are the service's AUTH_URL origin, which a back end is configured with:
// AUTH_URL when the caller says it, else the service's default, http://localhost:<PORT> (the
// base URL may name the same listener by another host, such as 127.0.0.1).
const origin = new URL(process.env.AUTH_URL ?? `http://localhost:${new URL(baseURL).port}`).origin;

let bearer = "";
let lastJWTHeader = null;
const client = createAuthClient({
  baseURL,
  plugins: [emailOTPClient(), jwtClient()],
  fetchOptions: {
    throw: true,
    auth: { type: "Bearer", token: () => bearer },
    onSuccess: (ctx) => {
      const token = ctx.response.headers.get("set-auth-token");
      if (token) bearer = token;
      lastJWTHeader = ctx.response.headers.get("set-auth-jwt");
    },
  },
});

const codeFor = codes(consoleLog);

async function signIn(email) {
  await client.emailOtp.sendVerificationOtp({ email, type: "sign-in" });
  return client.signIn.emailOtp({ email, otp: await codeFor(email) });
}


// verify checks a JWT as a back end in another language would: signature against the JWKS,
// issuer, audience, algorithm, and that it is current.
async function verify(token, jwks) {
  return jwtVerify(token, createLocalJWKSet(jwks), { issuer: origin, audience: origin, algorithms: ["EdDSA"] });
}

const { check, run } = checks();

check("token() without a session is 401 UNAUTHORIZED", async () => {
  bearer = "";
  await expectFailure(client.token(), 401, "UNAUTHORIZED");
});

check("token() is a JWT that jose verifies against jwks()", async () => {
  const email = `jwt-${Date.now()}@example.com`;
  const { user } = await signIn(email);
  const { token } = await client.token();
  const jwks = await client.jwks();
  assert.ok(jwks.keys.length >= 1, "the JWKS has a key");
  for (const key of jwks.keys) {
    assert.equal(key.d, undefined, "no private part in the JWKS");
    assert.equal(key.kty, "OKP");
    assert.equal(key.crv, "Ed25519");
  }
  const header = decodeProtectedHeader(token);
  assert.equal(header.alg, "EdDSA");
  assert.ok(jwks.keys.some((k) => k.kid === header.kid), "the header's kid is in the JWKS");
  const { payload } = await verify(token, jwks);
  assert.equal(payload.sub, user.id);
  assert.equal(payload.email, email);
  assert.equal(typeof payload.sid, "string");
  // The user as better-auth's default payload carries it.
  assert.equal(payload.id, user.id);
  assert.equal(payload.role, "user");
  assert.equal(payload.banned, false);
  assert.equal(payload.createdAt, user.createdAt.toISOString());
  assert.equal(payload.updatedAt, user.updatedAt.toISOString());
  const now = Math.floor(Date.now() / 1000);
  assert.ok(Math.abs(payload.iat - now) <= 5, `iat ${payload.iat} is now (${now})`);
  assert.ok(payload.exp > now && payload.exp - payload.iat <= 15 * 60, `lifetime ${payload.exp - payload.iat}s is at most 15 minutes`);
  // A back end that fetches the JWKS itself, as jose's remote set does, verifies it too.
  await jwtVerify(token, createRemoteJWKSet(new URL(`${baseURL}/api/auth/jwks`)), { issuer: origin, audience: origin });
});

check("an altered JWT is refused", async () => {
  await signIn(`alter-${Date.now()}@example.com`);
  const { token } = await client.token();
  const jwks = await client.jwks();
  const [h, p, s] = token.split(".");
  const claims = JSON.parse(Buffer.from(p, "base64url").toString());
  claims.sub = "someone-else";
  const forged = [h, Buffer.from(JSON.stringify(claims)).toString("base64url"), s].join(".");
  await assert.rejects(verify(forged, jwks), (err) => err.code === "ERR_JWS_SIGNATURE_VERIFICATION_FAILED");
  const badSig = [h, p, s.slice(0, -4) + (s.endsWith("AAAA") ? "BBBB" : "AAAA")].join(".");
  await assert.rejects(verify(badSig, jwks));
  // A JWT for another audience is refused by a back end that checks it.
  await assert.rejects(jwtVerify(token, createLocalJWKSet(jwks), { issuer: origin, audience: "https://other.example" }));
});

check("getSession() carries set-auth-jwt, the same session's JWT", async () => {
  const { user } = await signIn(`header-${Date.now()}@example.com`);
  lastJWTHeader = null;
  const session = await client.getSession();
  assert.equal(session.user.id, user.id);
  assert.ok(lastJWTHeader, "set-auth-jwt on get-session");
  const { payload } = await verify(lastJWTHeader, await client.jwks());
  assert.equal(payload.sub, user.id);
  assert.equal(payload.sid, session.session.id);
  bearer = "";
  lastJWTHeader = null;
  assert.equal(await client.getSession(), null);
  assert.equal(lastJWTHeader, null, "no set-auth-jwt without a session");
});

await run();
