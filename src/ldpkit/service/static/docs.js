// A plain listing of the collector's OpenAPI document (GET /docs): every route with its
// summary, description, parameters and responses. Replaces Swagger UI, which loads its
// files from a CDN and is blank offline.

function h(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

const res = await fetch('openapi.json');
const spec = await res.json();
const main = document.getElementById('api');
main.append(h('p', 'hint', `${spec.info.title} ${spec.info.version}: ${spec.info.description || ''}`));
for (const [path, methods] of Object.entries(spec.paths)) {
  for (const [method, op] of Object.entries(methods)) {
    const card = h('section', 'card');
    card.append(h('h2', null, `${method.toUpperCase()} ${path}`));
    if (op.summary) card.append(h('p', null, op.summary));
    if (op.description) card.append(h('pre', 'hint', op.description));
    const params = op.parameters || [];
    if (params.length) {
      const table = h('table');
      for (const p of params) {
        const tr = h('tr');
        tr.append(h('td', null, `${p.name} (${p.in}${p.required ? ', required' : ''})`));
        tr.append(h('td', 'hint', (p.schema && p.schema.description) || p.description || ''));
        table.append(tr);
      }
      card.append(table);
    }
    const codes = Object.entries(op.responses || {}).map(([code, r]) => `${code} ${r.description || ''}`);
    card.append(h('p', 'hint', `responses: ${codes.join(' · ')}`));
    main.append(card);
  }
}
