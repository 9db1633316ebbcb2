// Drives a running service with better-auth's own client library, configured as our existing
// mobile apps and back ends are (createAuthClient + emailOTPClient, fetchOptions.throw = true,
// bearer tokens from set-auth-token), and checks that every call behaves as that library expects.
//
// Usage: node conformance/better-auth-client.mjs <base URL> <console log file>
// The console log file is the service's stdout, where the console mailer writes the codes.
import assert from "node:assert/strict";
import { args, checks, codes, expectFailure } from "./lib/harness.mjs";
import { createAuthClient } from "better-auth/client";
import { emailOTPClient } from "better-auth/client/plugins";

const { baseURL, consoleLog } = args("better-auth-client.mjs");

let bearer = "";
const client = createAuthClient({
  baseURL,
  plugins: [emailOTPClient()],
  fetchOptions: {
    throw: true,
    auth: { type: "Bearer", token: () => bearer },
    onSuccess: (ctx) => {
      const token = ctx.response.headers.get("set-auth-token");
      if (token) bearer = token;
    },
  },
});

const nextCode = codes(consoleLog);
async function sendCode(email) {
  const res = await client.emailOtp.sendVerificationOtp({ email, type: "sign-in" });
  assert.deepEqual(res, { success: true });
  return nextCode(email);
}

const wrong = (code) => (code === "000000" ? "111111" : "000000");
const { check, run } = checks();

check("sign-up by code, then the session by bearer", async () => {
  const email = `ada-${Date.now()}@example.com`;
  const code = await sendCode(email);
  await expectFailure(client.signIn.emailOtp({ email, otp: wrong(code) }), 400, "INVALID_OTP");
  const res = await client.signIn.emailOtp({ email, otp: code, name: "Ada" });
  assert.equal(typeof res.token, "string");
  assert.equal(res.user.email, email);
  assert.equal(res.user.name, "Ada");
  assert.equal(res.user.emailVerified, true);
  assert.ok(res.user.createdAt instanceof Date, "createdAt is parsed into a Date");
  assert.ok(bearer.startsWith(res.token + "."), "set-auth-token was captured");

  const session = await client.getSession();
  assert.equal(session.user.email, email);
  assert.equal(session.session.token, res.token);
  assert.ok(session.session.expiresAt instanceof Date);

  assert.deepEqual(await client.updateUser({ name: "Ada Lovelace" }), { status: true });
  assert.equal((await client.getSession()).user.name, "Ada Lovelace");
  await expectFailure(client.updateUser({ email: "other@example.com" }), 400, "EMAIL_CAN_NOT_BE_UPDATED");

  const me = await fetch(`${baseURL}/api/me`, { headers: { authorization: `Bearer ${bearer}` } });
  assert.equal(me.status, 200);
  assert.equal((await me.json()).preferences.isTrialEligible, true);

  assert.deepEqual(await client.signOut(), { success: true });
  assert.equal(await client.getSession(), null);
  await expectFailure(client.updateUser({ name: "x" }), 401, "UNAUTHORIZED");
  bearer = "";
});

check("the raw token of the body works as a bearer token", async () => {
  const email = `raw-${Date.now()}@example.com`;
  const res = await client.signIn.emailOtp({ email, otp: await sendCode(email) });
  bearer = res.token;
  assert.equal((await client.getSession()).user.email, email);
  await client.signOut();
  bearer = "";
});

check("an Expo-style client replays the decoded cookie", async () => {
  const email = `expo-${Date.now()}@example.com`;
  await client.signIn.emailOtp({ email, otp: await sendCode(email) });
  const signed = bearer;
  bearer = "";
  const res = await fetch(`${baseURL}/api/auth/get-session`, { headers: { cookie: `auth.session_token=${signed}` } });
  assert.equal((await res.json()).user.email, email);
});

check("five wrong codes, then the right one, is TOO_MANY_ATTEMPTS", async () => {
  const email = `guess-${Date.now()}@example.com`;
  const code = await sendCode(email);
  for (let i = 0; i < 5; i++) {
    await expectFailure(client.signIn.emailOtp({ email, otp: wrong(code) }), 400, "INVALID_OTP");
  }
  await expectFailure(client.signIn.emailOtp({ email, otp: code }), 403, "TOO_MANY_ATTEMPTS");
  await expectFailure(client.signIn.emailOtp({ email, otp: code }), 400, "INVALID_OTP");
});

check("bad input is a thrown 4xx", async () => {
  await expectFailure(client.emailOtp.sendVerificationOtp({ email: "not an address", type: "sign-in" }), 400, "INVALID_EMAIL");
  await expectFailure(client.emailOtp.sendVerificationOtp({ email: "a@example.com", type: "change-email" }), 400, "INVALID_OTP_TYPE");
  await expectFailure(client.emailOtp.sendVerificationOtp({ email: "a@example.com" }), 400, "VALIDATION_ERROR");
  assert.equal(await client.getSession(), null);
});

await run();
