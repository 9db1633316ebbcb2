// Drives a running service with better-auth's own client library and its adminClient() through
// the admin plugin's routes a dashboard calls: listUsers, getUser, updateUser, setRole, banUser
// and the banned sign-in, unbanUser, listUserSessions, revokeUserSession(s), removeUser,
// impersonateUser and hasPermission, each side a client of its own holding its bearer token.
// The service must be started with AUTH_ADMIN_EMAILS=conformance-admin@example.com.
//
// Usage: node conformance/admin.mjs <base URL> <console log file>
import assert from "node:assert/strict";
import { args, checks, codes, expectFailure } from "./lib/harness.mjs";
import { createAuthClient } from "better-auth/client";
import { adminClient, emailOTPClient } from "better-auth/client/plugins";

const { baseURL, consoleLog } = args("admin.mjs");
const codeFor = codes(consoleLog);
const adminEmail = "conformance-admin@example.com";

// person is one signed-in client with its own bearer token.
function person() {
  const p = { bearer: "" };
  p.client = createAuthClient({
    baseURL,
    plugins: [emailOTPClient(), adminClient()],
    fetchOptions: {
      throw: true,
      auth: { type: "Bearer", token: () => p.bearer },
      onSuccess: (ctx) => {
        const token = ctx.response.headers.get("set-auth-token");
        if (token) p.bearer = token;
      },
    },
  });
  return p;
}

async function signIn(email) {
  const p = person();
  await p.client.emailOtp.sendVerificationOtp({ email, type: "sign-in" });
  await p.client.signIn.emailOtp({ email, otp: await codeFor(email) });
  p.user = (await p.client.getSession()).user;
  return p;
}

const { check, run } = checks();
const stamp = Date.now();
let admin;

check("AUTH_ADMIN_EMAILS makes the first admin; a user is refused with the route's code", async () => {
  admin = await signIn(adminEmail);
  assert.equal(admin.user.role, "admin");
  assert.equal(admin.user.banned, false);
  const user = await signIn(`plain-${stamp}@example.com`);
  assert.equal(user.user.role, "user");
  await expectFailure(user.client.admin.listUsers({ query: {} }), 403, "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS");
  await expectFailure(user.client.admin.banUser({ userId: admin.user.id }), 403, "YOU_ARE_NOT_ALLOWED_TO_BAN_USERS");
  await expectFailure(user.client.admin.removeUser({ userId: admin.user.id }), 403, "YOU_ARE_NOT_ALLOWED_TO_DELETE_USERS");
  assert.deepEqual(await admin.client.admin.hasPermission({ permissions: { user: ["ban"] } }), { error: null, success: true });
  assert.deepEqual(await user.client.admin.hasPermission({ permissions: { user: ["ban"] } }), { error: null, success: false });
  const anonymous = person();
  await expectFailure(anonymous.client.admin.listUsers({ query: {} }), 401, "UNAUTHORIZED");
});

check("listUsers searches, sorts and pages; getUser, updateUser and setRole", async () => {
  const prefix = `listed-${stamp}`;
  const people = [];
  for (const n of [1, 2, 3]) people.push(await signIn(`${prefix}-${n}@example.com`));
  const page = await admin.client.admin.listUsers({
    query: { searchValue: prefix, searchField: "email", searchOperator: "starts_with", limit: 2, offset: 0, sortBy: "email", sortDirection: "desc" },
  });
  assert.equal(page.total, 3);
  assert.equal(page.limit, 2);
  assert.deepEqual(page.users.map((u) => u.email), [`${prefix}-3@example.com`, `${prefix}-2@example.com`]);
  const admins = await admin.client.admin.listUsers({ query: { filterField: "role", filterValue: "admin", filterOperator: "eq" } });
  assert.ok(admins.users.some((u) => u.email === adminEmail));
  // An array, as the client sends it: the key repeated (filterValue=a&filterValue=b).
  const picked = await admin.client.admin.listUsers({
    query: { filterField: "email", filterOperator: "in", filterValue: [`${prefix}-1@example.com`, `${prefix}-3@example.com`], sortBy: "email" },
  });
  assert.deepEqual(picked.users.map((u) => u.email), [`${prefix}-1@example.com`, `${prefix}-3@example.com`]);
  const others = await admin.client.admin.listUsers({
    query: { searchValue: prefix, filterField: "email", filterOperator: "not_in", filterValue: [`${prefix}-1@example.com`, `${prefix}-3@example.com`] },
  });
  assert.deepEqual(others.users.map((u) => u.email), [`${prefix}-2@example.com`]);
  const one = await admin.client.admin.getUser({ query: { id: people[0].user.id } });
  assert.equal(one.email, `${prefix}-1@example.com`);
  const renamed = await admin.client.admin.updateUser({ userId: one.id, data: { name: "Renamed" } });
  assert.equal(renamed.name, "Renamed");
  const { user } = await admin.client.admin.setRole({ userId: one.id, role: "admin" });
  assert.equal(user.role, "admin");
  await expectFailure(admin.client.admin.setRole({ userId: one.id, role: "owner" }), 400, "YOU_ARE_NOT_ALLOWED_TO_SET_NON_EXISTENT_VALUE");
  await expectFailure(admin.client.admin.getUser({ query: { id: "00000000-0000-4000-8000-000000000000" } }), 404, "USER_NOT_FOUND");
});

check("banUser ends every session; the banned account gets its code and is refused BANNED_USER", async () => {
  const email = `banned-${stamp}@example.com`;
  const [a, b] = [await signIn(email), await signIn(email)];
  const { user } = await admin.client.admin.banUser({ userId: a.user.id, banReason: "spam", banExpiresIn: 3600 });
  assert.equal(user.banned, true);
  assert.equal(user.banReason, "spam");
  assert.ok(user.banExpires instanceof Date || typeof user.banExpires === "string");
  assert.equal(await a.client.getSession({ query: { disableCookieCache: true } }), null);
  assert.equal(await b.client.getSession({ query: { disableCookieCache: true } }), null);
  const again = person();
  assert.deepEqual(await again.client.emailOtp.sendVerificationOtp({ email, type: "sign-in" }), { success: true });
  const refused = await expectFailure(again.client.signIn.emailOtp({ email, otp: await codeFor(email) }), 403, "BANNED_USER");
  assert.match(refused.error.message, /banned/);
  await expectFailure(admin.client.admin.banUser({ userId: admin.user.id }), 400, "YOU_CANNOT_BAN_YOURSELF");
  const { user: lifted } = await admin.client.admin.unbanUser({ userId: a.user.id });
  assert.equal(lifted.banned, false);
  await again.client.emailOtp.sendVerificationOtp({ email, type: "sign-in" });
  await again.client.signIn.emailOtp({ email, otp: await codeFor(email) });
  assert.equal((await again.client.getSession()).user.id, a.user.id);
});

check("listUserSessions, revokeUserSession, revokeUserSessions, removeUser", async () => {
  const email = `managed-${stamp}@example.com`;
  const [a, b] = [await signIn(email), await signIn(email)];
  const { sessions } = await admin.client.admin.listUserSessions({ userId: a.user.id });
  assert.equal(sessions.length, 2);
  const bID = (await b.client.getSession()).session.id;
  assert.deepEqual(await admin.client.admin.revokeUserSession({ sessionToken: bID }), { success: true });
  assert.equal(await b.client.getSession({ query: { disableCookieCache: true } }), null);
  assert.deepEqual(await admin.client.admin.revokeUserSessions({ userId: a.user.id }), { success: true });
  assert.equal(await a.client.getSession({ query: { disableCookieCache: true } }), null);
  assert.deepEqual(await admin.client.admin.removeUser({ userId: a.user.id }), { success: true });
  await expectFailure(admin.client.admin.getUser({ query: { id: a.user.id } }), 404, "USER_NOT_FOUND");
  // Where better-auth answers success or an empty list, a client throws on nothing: a session
  // gone already, an account that does not exist.
  assert.deepEqual(await admin.client.admin.revokeUserSession({ sessionToken: bID }), { success: true });
  assert.deepEqual(await admin.client.admin.listUserSessions({ userId: a.user.id }), { sessions: [] });
  assert.deepEqual(await admin.client.admin.revokeUserSessions({ userId: a.user.id }), { success: true });
});

check("impersonateUser opens a marked session without admin powers", async () => {
  const target = await signIn(`target-${stamp}@example.com`);
  const acting = person();
  acting.bearer = admin.bearer;
  const { session, user } = await acting.client.admin.impersonateUser({ userId: target.user.id });
  assert.equal(user.id, target.user.id);
  assert.equal(session.impersonatedBy, admin.user.id);
  assert.notEqual(acting.bearer, admin.bearer, "the client now holds the impersonation token");
  const seen = await acting.client.getSession();
  assert.equal(seen.user.id, target.user.id);
  assert.equal(seen.session.impersonatedBy, admin.user.id);
  await expectFailure(acting.client.admin.listUsers({ query: {} }), 403, "YOU_ARE_NOT_ALLOWED_TO_LIST_USERS");
  assert.equal((await target.client.listSessions()).length, 1, "the account's own list leaves the impersonation out");
  await expectFailure(admin.client.admin.impersonateUser({ userId: admin.user.id }), 403, "YOU_CANNOT_IMPERSONATE_ADMINS");
});

await run();
