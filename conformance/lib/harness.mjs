// What every conformance script shares: its arguments, the codes the console mailer writes to
// the service's log, the check of a thrown better-auth error, and the runner of the checks. It
// lives in lib/ so that the Go test, which runs every conformance/*.mjs, does not run it.
import { readFileSync } from "node:fs";
import assert from "node:assert/strict";

// args are the base URL of the service and its console log file, or the script stops with its
// usage.
export function args(script) {
  const [baseURL, consoleLog] = process.argv.slice(2);
  if (!baseURL || !consoleLog) {
    console.error(`usage: ${script} <base URL> <console log file>`);
    process.exit(2);
  }
  return { baseURL, consoleLog };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// codes reads the sign-in codes the console mailer writes to consoleLog. next(email) waits for a
// code to email that was not there at its previous call for the same address.
export function codes(consoleLog) {
  const seen = {};
  return async function next(email) {
    const pattern = new RegExp(`mail kind=sign-in-code to=${email.replace(/[.+]/g, "\\$&")} code=(\\S+)`, "g");
    for (let i = 0; i < 200; i++) {
      const matches = [...readFileSync(consoleLog, "utf8").matchAll(pattern)];
      if (matches.length > (seen[email] ?? 0)) {
        seen[email] = matches.length;
        return matches.at(-1)[1];
      }
      await sleep(10);
    }
    throw new Error(`no new code for ${email} in ${consoleLog}`);
  };
}

// expectFailure awaits promise and checks it threw better-auth's error with status and code.
export async function expectFailure(promise, status, code) {
  try {
    await promise;
  } catch (err) {
    assert.equal(err.status, status, `status of ${JSON.stringify(err.error)}`);
    assert.equal(err.error?.code, code);
    assert.equal(typeof err.error?.message, "string");
    return err;
  }
  assert.fail(`expected a ${status} ${code} failure, the call succeeded`);
}

// checks collects named checks; run runs them in order, prints each result, and exits 1 if any
// failed.
export function checks() {
  const list = [];
  return {
    check: (name, fn) => list.push({ name, fn }),
    async run() {
      let failed = 0;
      for (const { name, fn } of list) {
        try {
          await fn();
          console.log(`ok   ${name}`);
        } catch (err) {
          failed++;
          console.log(`FAIL ${name}\n     ${err.stack ?? err}`);
        }
      }
      process.exit(failed ? 1 : 0);
    },
  };
}
