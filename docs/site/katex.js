// Renders the math pymdownx.arithmatex marks (\( \) inline, \[ \] display) with the vendored KaTeX,
// on every page Material shows (document$ fires on each page, instant navigation included).
document$.subscribe(({ body }) => {
  renderMathInElement(body, {
    delimiters: [
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true },
    ],
    throwOnError: false,
  });
});
