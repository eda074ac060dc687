// The job's Markdown report, as the service renders it (GET .../report.md): one renderer,
// shared with `tvmrepro report --markdown`.
export async function reportMarkdown(base) {
  const response = await fetch(`${base}/report.md`);
  if (!response.ok) throw new Error(`report.md: HTTP ${response.status}`);
  return response.text();
}
