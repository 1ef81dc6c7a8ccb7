/**
 * A self-contained API reference page rendered from the OpenAPI document in the browser: no
 * third-party script, so it works offline and under a strict CSP.
 */
export function renderDocsPage(openapiUrl: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.5 system-ui,sans-serif;margin:0 auto;max-width:960px;padding:1rem 2rem;color:#1f2328}
h1{font-size:1.6rem}h2{margin-top:2rem;border-bottom:1px solid #d0d7de}
.op{border:1px solid #d0d7de;border-radius:6px;margin:.5rem 0;padding:.4rem .8rem}
.m{display:inline-block;min-width:4.5rem;font-weight:600;font-family:monospace}
.GET{color:#0969da}.POST{color:#1a7f37}.PATCH{color:#9a6700}.DELETE{color:#cf222e}
code,pre{font-family:ui-monospace,monospace;font-size:13px}pre{background:#f6f8fa;padding:.6rem;overflow:auto}
details summary{cursor:pointer}
</style></head>
<body><h1 id="title">API reference</h1><p id="desc"></p><div id="ops">Loading ${openapiUrl} …</div>
<script>
fetch(${JSON.stringify(openapiUrl)}).then(r => r.json()).then(doc => {
  const esc = s => String(s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));
  document.getElementById('title').textContent = doc.info.title + ' ' + doc.info.version;
  document.getElementById('desc').textContent = doc.info.description || '';
  const byTag = {};
  for (const [path, item] of Object.entries(doc.paths)) for (const [method, op] of Object.entries(item)) {
    if (typeof op !== 'object' || !op.responses) continue;
    const tag = (op.tags && op.tags[0]) || 'other';
    (byTag[tag] ||= []).push({ path, method: method.toUpperCase(), op });
  }
  let html = '';
  for (const tag of Object.keys(byTag).sort()) {
    html += '<h2>' + esc(tag) + '</h2>';
    for (const { path, method, op } of byTag[tag]) {
      html += '<details class="op"><summary><span class="m ' + method + '">' + method + '</span> <code>' + esc(path) +
        '</code> ' + esc(op.summary || '') + '</summary><pre>' + esc(JSON.stringify(op, null, 2)) + '</pre></details>';
    }
  }
  document.getElementById('ops').innerHTML = html;
}).catch(e => { document.getElementById('ops').textContent = 'Could not load the OpenAPI document: ' + e; });
</script></body></html>`;
}
