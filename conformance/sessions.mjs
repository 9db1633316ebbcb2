// Drives a running service with better-auth's own client library through the session management
// routes an account page calls (listSessions, revokeSession, revokeSessions,
// revokeOtherSessions), deleteUser and listAccounts, with several devices of one account, each a
// client of its own holding its bearer token as a mobile app does.
//
// Usage: node conformance/sessions.mjs <base URL> <console log file>
import assert from "node:assert/strict";
import { args, checks, codes, expectFailure } from "./lib/harness.mjs";
import { createAuthClient } from "better-auth/client";
import { emailOTPClient } from "better-auth/client/plugins";

const { baseURL, consoleLog } = args("sessions.mjs");

// device is one signed-in app: a client of its own with its own bearer token.
function device() {
  const d = { bearer: "" };
  d.client = createAuthClient({
    baseURL,
    plugins: [emailOTPClient()],
    fetchOptions: {
      throw: true,
      auth: { type: "Bearer", token: () => d.bearer },
      onSuccess: (ctx) => {
        const token = ctx.response.headers.get("set-auth-token");
        if (token) d.bearer = token;
      },
    },
  });
  return d;
}

const codeFor = codes(consoleLog);

// signIn signs a new device of the account email in.
async function signIn(email) {
  const d = device();
  await d.client.emailOtp.sendVerificationOtp({ email, type: "sign-in" });
  await d.client.signIn.emailOtp({ email, otp: await codeFor(email) });
  return d;
}


const { check, run } = checks();

check("three devices list each other, newest first, with handles", async () => {
  const email = `devices-${Date.now()}@example.com`;
  const [a, b, c] = [await signIn(email), await signIn(email), await signIn(email)];
  const sessions = await a.client.listSessions();
  assert.equal(sessions.length, 3);
  const own = (await a.client.getSession()).session;
  for (const s of sessions) {
    assert.ok(s.createdAt instanceof Date && s.expiresAt instanceof Date, "dates are parsed");
    assert.equal(s.token, s.id, "the token is the session's handle");
    for (const d of [a, b, c]) assert.ok(!d.bearer.startsWith(s.token), "no listed token is a credential");
  }
  // A client finds its own session by get-session's id.
  assert.equal(sessions.filter((s) => s.id === own.id).length, 1);
  assert.ok(sessions[0].createdAt >= sessions[1].createdAt && sessions[1].createdAt >= sessions[2].createdAt);
  const current = own.id;

  // a revokes b by its handle: b is signed out at once, a and c are not.
  const bID = (await b.client.getSession()).session.id;
  assert.deepEqual(await a.client.revokeSession({ token: bID }), { status: true });
  assert.equal(await b.client.getSession({ query: { disableCookieCache: true } }), null);
  assert.equal((await c.client.getSession()).session.userId, sessions[0].userId);
  assert.equal((await a.client.listSessions()).length, 2);
  // Gone already: no error, as better-auth answers (a double click throws nothing).
  assert.deepEqual(await a.client.revokeSession({ token: bID }), { status: true });

  // revokeOtherSessions keeps a only.
  const d = await signIn(email);
  assert.deepEqual(await a.client.revokeOtherSessions(), { status: true });
  assert.equal(await c.client.getSession(), null);
  assert.equal(await d.client.getSession(), null);
  const left = await a.client.listSessions();
  assert.deepEqual(left.map((s) => s.id), [current]);

  // revokeSessions ends a too.
  const e = await signIn(email);
  assert.deepEqual(await a.client.revokeSessions(), { status: true });
  assert.equal(await a.client.getSession(), null);
  assert.equal(await e.client.getSession(), null);
  await expectFailure(a.client.listSessions(), 401, "UNAUTHORIZED");
});

check("another account's session cannot be revoked, and says no more than a wrong handle", async () => {
  const mine = await signIn(`mine-${Date.now()}@example.com`);
  const theirs = await signIn(`theirs-${Date.now()}@example.com`);
  const theirs_ = (await theirs.client.getSession()).session;
  // better-auth answers {status: true} and ends nothing, whatever the token names.
  for (const token of [theirs_.id, theirs_.token, "00000000-0000-4000-8000-000000000000"]) {
    assert.deepEqual(await mine.client.revokeSession({ token }), { status: true });
  }
  assert.ok(await theirs.client.getSession({ query: { disableCookieCache: true } }));
  assert.ok(await mine.client.getSession({ query: { disableCookieCache: true } }));
});

check("deleteUser starts the grace period; listAccounts answers", async () => {
  const email = `delete-${Date.now()}@example.com`;
  const a = await signIn(email);
  assert.deepEqual(await a.client.listAccounts(), []);
  const id = (await a.client.getSession()).user.id;
  assert.deepEqual(await a.client.deleteUser(), { success: true, message: "User deleted" });
  assert.equal(await a.client.getSession(), null);
  const back = await signIn(email);
  assert.equal((await back.client.getSession()).user.id, id, "signing in restores the same account");
});

check("without a session every route is 401", async () => {
  const nobody = device();
  await expectFailure(nobody.client.listSessions(), 401, "UNAUTHORIZED");
  await expectFailure(nobody.client.revokeSession({ token: "x" }), 401, "UNAUTHORIZED");
  await expectFailure(nobody.client.revokeSessions(), 401, "UNAUTHORIZED");
  await expectFailure(nobody.client.revokeOtherSessions(), 401, "UNAUTHORIZED");
  await expectFailure(nobody.client.deleteUser(), 401, "UNAUTHORIZED");
  await expectFailure(nobody.client.listAccounts(), 401, "UNAUTHORIZED");
});

await run();
