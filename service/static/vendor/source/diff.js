// diff2html: a unified diff as side-by-side HTML (every line escaped by the library).
export { html as diffHtml } from "diff2html";
