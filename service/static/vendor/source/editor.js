// CodeMirror 6 with its Python mode: the case editor and the read-only IR views.
export { basicSetup, EditorView } from "codemirror";
export { EditorState } from "@codemirror/state";
export { python } from "@codemirror/lang-python";
