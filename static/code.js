// The behaviour of the code-entry component, for browsers with JavaScript (the pages work
// without it: every form posts and the server answers with a whole page).
//
// - The code input keeps only characters of its alphabet (data-otp-alphabet), so a pasted
//   " 123 456 " becomes "123456", and submits itself once it holds data-otp-length of them. Typing
//   a new code takes a wrong code's error away, from the input and from #code-error.
// - A resend button with data-cooldown="N" stays disabled, with a visible countdown, for N seconds.
// - When the component reports "verified", the page decides what happens next, from
//   data-after-verify on its root: "redirect" (sign-in, sign-up: grant the marketing opt-in if it is
//   ticked, then go to the redirect target) or "claim" (checkout: claim the purchase).
// - Elements marked data-reveal-with-js are hidden for browsers without JavaScript and shown here.
(function () {
  "use strict";

  function sanitize(input, text) {
    var alphabet = input.dataset.otpAlphabet || "";
    var length = parseInt(input.dataset.otpLength, 10) || 0;
    var out = "";
    for (var i = 0; i < text.length && out.length < length; i++) {
      var ch = text.charAt(i);
      if (alphabet.indexOf(ch) >= 0) {
        out += ch;
      }
    }
    return out;
  }

  function submitWhenFull(input) {
    var length = parseInt(input.dataset.otpLength, 10) || 0;
    var form = input.form;
    if (input.value.length === length && form && !form.dataset.submitted) {
      form.dataset.submitted = "1";
      form.requestSubmit();
    }
  }

  function initCodeInput(input) {
    input.addEventListener("paste", function (e) {
      var text = (e.clipboardData || window.clipboardData).getData("text");
      e.preventDefault();
      input.value = sanitize(input, text);
      submitWhenFull(input);
    });
    var onInput = function () {
      var clean = sanitize(input, input.value);
      if (clean !== input.value) {
        input.value = clean;
      }
      if (clean && input.getAttribute("aria-invalid") === "true") {
        input.removeAttribute("aria-invalid");
        var error = document.getElementById("code-error");
        if (error) {
          error.textContent = "";
        }
      }
      submitWhenFull(input);
    };
    input.addEventListener("input", onInput);
    // A value can arrive before this runs (autofill of the one-time code, fast typing): treat
    // it as input too.
    if (input.value) {
      onInput();
    }
  }

  function initCooldown(button) {
    var seconds = parseInt(button.dataset.cooldown, 10) || 0;
    if (seconds <= 0) {
      return;
    }
    var label = button.textContent;
    // The count keeps the width of its first value (tabular digits, a figure space for each
    // digit it loses), so the line never re-wraps as it counts down.
    var width = String(seconds).length;
    button.disabled = true;
    var tick = function () {
      if (!button.isConnected) {
        return;
      }
      if (seconds <= 0) {
        button.disabled = false;
        button.textContent = label;
        return;
      }
      var count = String(seconds);
      while (count.length < width) {
        count = "\u2007" + count;
      }
      button.textContent = label + " (" + count + " s)";
      seconds--;
      setTimeout(tick, 1000);
    };
    tick();
  }

  function init(root) {
    root.querySelectorAll("[data-reveal-with-js]").forEach(function (el) {
      el.hidden = false;
    });
    root.querySelectorAll("input[data-otp-length]").forEach(function (input) {
      if (!input.dataset.ready) {
        input.dataset.ready = "1";
        initCodeInput(input);
      }
    });
    root.querySelectorAll("button[data-cooldown]").forEach(function (button) {
      if (!button.dataset.ready) {
        button.dataset.ready = "1";
        initCooldown(button);
      }
    });
  }

  document.addEventListener("verified", function (e) {
    var page = document.querySelector("[data-after-verify]");
    var detail = e.detail || {};
    if (page && page.dataset.afterVerify === "claim" && window.htmx) {
      window.htmx.ajax("POST", "/checkout/claim", {
        target: "#claim-status",
        swap: "innerHTML",
        values: { purchase: page.dataset.purchase || "" },
      });
      return;
    }
    var go = function () {
      window.location.assign(detail.redirect || "/");
    };
    var optIn = document.getElementById("marketing-opt-in");
    if (optIn && optIn.checked) {
      // The consent is best-effort: a failure never stops the sign-up.
      fetch("/api/marketing-consent", { method: "POST", credentials: "same-origin" }).then(go, go);
      return;
    }
    go();
  });

  // An error notice (#flash) is about the request that failed: the next request clears it.
  document.addEventListener("htmx:beforeRequest", function () {
    var flash = document.getElementById("flash");
    if (flash) {
      flash.textContent = "";
    }
  });

  document.addEventListener("htmx:load", function (e) {
    init(e.detail.elt);
  });
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", function () {
      init(document);
    });
  } else {
    init(document);
  }
})();
