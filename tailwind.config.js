/** Tailwind 3.4 configuration: classes are read from the templ views and the page script.
 *  `npm run build:css` writes static/app.css, which is committed and embedded in the binary. */
const defaultTheme = require("tailwindcss/defaultTheme");

module.exports = {
  content: ["./views/**/*.templ", "./static/code.js"],
  darkMode: "media", // follows prefers-color-scheme
  theme: {
    extend: {
      fontFamily: {
        // Inter, self-hosted (static/inter.woff2, see scripts/font); the system's sans until it loads.
        sans: ["Inter", ...defaultTheme.fontFamily.sans],
      },
      colors: {
        // The brand's violet-indigo ("iris"): 600 carries white text at 6.3:1, 300 reads at 8.7:1
        // on the dark cards.
        brand: {
          50: "#f3f3ff", 100: "#e8e8ff", 200: "#d4d3ff", 300: "#b1aefc", 400: "#8c86f7",
          500: "#6c63f0", 600: "#5646e0", 700: "#4836c4", 800: "#3c2e9e", 900: "#2f2777", 950: "#1d1748",
        },
      },
    },
  },
  plugins: [],
};
