/** Tailwind 3.4 configuration: classes are read from the templ views and the page script.
 *  `npm run build:css` writes static/app.css, which is committed and embedded in the binary. */
module.exports = {
  content: ["./views/**/*.templ", "./static/code.js"],
  darkMode: "media", // follows prefers-color-scheme
  theme: {
    extend: {
      colors: {
        brand: { 50: "#eef5ff", 300: "#9bb8ff", 500: "#3b6cf6", 600: "#2f56d6", 700: "#2645ad" },
      },
    },
  },
  plugins: [],
};
