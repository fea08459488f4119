/* unsee view: draws the JSON of #unsee-data with Cytoscape (preset layout:
 * positions come from Python, unsee/plugins/view/layout.py). Vanilla JS, no
 * network. Payload strings only ever reach the DOM as textContent. Results
 * for tests go to #unsee-stats (data-* attributes). URL hash options:
 * #mode=expanded|collapsed (start mode), #turn=turn-<n> (expand, zoom to
 * that turn), #node=<artifact id> (select it, show its fields). A forget's
 * reconciliation of the world (outcome.reconciliation: ids, names and states)
 * is drawn on its before graph: a compensation as a node below the lanes,
 * linked from the orphaned call it undoes; a call nobody can undo marked. */
(function () {
  'use strict';
  var stats = document.getElementById('unsee-stats');
  function fail(err) {
    var msg = err && (err.stack || err.message) ? (err.stack || err.message) : String(err);
    var old = stats.getAttribute('data-error');
    stats.setAttribute('data-error', old ? old + '\n' + msg : msg);
  }
  window.addEventListener('error', function (e) { fail(e.error || e.message); });
  document.addEventListener('securitypolicyviolation', function (e) {
    fail('CSP blocked ' + e.blockedURI + ' (' + e.violatedDirective + ')');
  });

  var TYPE_COLOURS = {
    user_input: '#4e79a7', memory_read: '#59a14f', tool_return: '#f28e2b',
    prompt_block: '#b07aa1', model_turn: '#76b7b2', reply: '#9c755f', plan: '#edc948',
    tool_call: '#17becf', summary: '#bcbd22', memory_write: '#8cd17d', state_write: '#86bcb6'
  };
  var OTHER = '#bab0ac';
  var RED = '#d62728', ENTRY = '#6b0000', FLAG = '#ff7f0e', ORPHAN = '#8e44ad';
  var COMPENSATION = '#1a9850', LEFT = '#3b3b3b';
  // a reconciliation item's state, as a class of its node (only these: never a payload string as a class)
  var ITEM_STATES = { planned: 'pending', started: 'pending', done: 'done', failed: 'failed' };
  // a transition in several lists is coloured by the first one here
  // (before tau: the clean prefix, reused; from tau: the suffix, replayed - see payload.before_outcomes)
  var OUTCOMES = [['sanitized', '#d62728'], ['executed', '#e66101'], ['decoded', '#7b3294'],
    ['from_record', '#4dac26'], ['rematerialised', '#2b8cbe'], ['refed', '#9ecae1'], ['replaced', '#f4a582'],
    ['prefix', '#d0d4db']];
  var UNCHANGED = '#d0d4db';
  var contentIncluded = false; // the payload's content_included
  var BIG = 2000; // above this many elements: cheaper rendering while moving

  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === 'text') e.textContent = attrs[k]; else if (k === 'onclick') e.onclick = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (kids || []).forEach(function (c) { if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  function $(id) { return document.getElementById(id); }
  function colourOf(type) { return TYPE_COLOURS[type] || OTHER; }
  function str(v) { return v == null ? '' : String(v); }
  function setOf(list) { var s = Object.create(null); (list || []).forEach(function (x) { s[x] = true; }); return s; }
  function clip(s, n) { return s.length > n ? s.slice(0, n) + ' …' : s; }
  function val(v) { return v !== null && typeof v === 'object' ? clip(JSON.stringify(v), 600) : str(v); }
  function short(list, n) {
    list = list || [];
    var head = list.slice(0, n).join(', ');
    return list.length > n ? head + ' … and ' + (list.length - n) + ' more' : head;
  }

  var STYLE = [
    { selector: 'node', style: { 'width': 22, 'height': 22, 'background-color': 'data(colour)',
      'border-width': 1, 'border-color': '#555', 'label': 'data(label)', 'font-size': 10,
      'text-valign': 'bottom', 'text-margin-y': 2, 'min-zoomed-font-size': 6, 'color': '#333' } },
    { selector: 'node.flagged', style: { 'outline-width': 3, 'outline-color': FLAG, 'outline-offset': 2 } },
    { selector: 'node.tainted', style: { 'border-width': 5, 'border-color': RED, 'color': RED } },
    { selector: 'node.in-closure', style: { 'border-width': 2, 'border-color': RED } },
    { selector: 'node.entry', style: { 'width': 32, 'height': 32, 'border-width': 7,
      'border-style': 'double', 'border-color': ENTRY, 'font-weight': 'bold', 'color': ENTRY } },
    { selector: 'node.orphaned', style: { 'border-style': 'dashed', 'border-width': 4, 'border-color': ORPHAN } },
    { selector: 'node.new', style: { 'border-style': 'dashed', 'border-width': 3, 'border-color': '#222' } },
    { selector: 'node.left', style: { 'shape': 'octagon', 'width': 28, 'height': 28, 'color': LEFT, 'font-weight': 'bold',
      'underlay-color': LEFT, 'underlay-opacity': 0.3, 'underlay-padding': 7, 'underlay-shape': 'ellipse' } },
    { selector: 'node.compensation', style: { 'shape': 'hexagon', 'width': 30, 'height': 22,
      'border-width': 2, 'border-color': '#0b4d26', 'color': '#0b4d26' } },
    { selector: 'node.compensation.pending', style: { 'border-style': 'dashed', 'background-opacity': 0.45 } },
    { selector: 'node.compensation.failed', style: { 'border-width': 4, 'border-color': RED, 'color': RED } },
    { selector: 'node.checkpoint', style: { 'shape': 'diamond', 'width': 'data(size)', 'height': 'data(size)',
      'background-color': '#333', 'border-width': 0, 'font-size': 'data(fs)', 'text-valign': 'top', 'text-margin-y': -2 } },
    { selector: 'node.lane', style: { 'background-opacity': 0, 'border-width': 0, 'font-size': 13,
      'text-valign': 'center', 'text-halign': 'left', 'color': '#777', 'events': 'no', 'min-zoomed-font-size': 4 } },
    { selector: 'node.turn', style: { 'shape': 'round-rectangle', 'width': 'data(size)', 'height': 'data(size)',
      'text-valign': 'center', 'text-halign': 'center', 'font-size': 'data(fs)', 'border-width': 'data(bw)' } },
    { selector: 'node.turn.tainted', style: { 'border-width': function (n) { return 5 * n.data('bw'); } } },
    { selector: 'node:selected', style: { 'overlay-color': '#1f5fbf', 'overlay-opacity': 0.25, 'overlay-padding': 6 } },
    { selector: 'edge', style: { 'width': 1, 'line-color': '#9aa3b2', 'target-arrow-color': '#9aa3b2',
      'target-arrow-shape': 'triangle', 'arrow-scale': 0.7, 'curve-style': 'straight' } },
    { selector: 'edge.tainted', style: { 'line-color': RED, 'target-arrow-color': RED, 'width': 2 } },
    { selector: 'edge.compensates', style: { 'line-color': COMPENSATION, 'target-arrow-color': COMPENSATION,
      'line-style': 'dashed', 'width': 2 } },
    { selector: 'edge.turn-edge', style: { 'curve-style': 'unbundled-bezier', 'control-point-distances': 'data(cpd)',
      'control-point-weights': 0.5, 'width': 'data(w)', 'label': 'data(count)', 'font-size': 'data(fs)',
      'text-background-color': '#fff', 'text-background-opacity': 0.8, 'min-zoomed-font-size': 7 } }
  ];

  /* One graph (main, before or after): the artifacts, an id index, the
   * positions and the per-node extras (tainted set, outcome colours). */
  function Graph(name, g, opts) {
    this.name = name; this.g = g || {}; this.opts = opts || {};
    this.artifacts = this.g.artifacts || [];
    this.layout = this.g.layout || {};
    this.byId = Object.create(null);
    for (var i = 0; i < this.artifacts.length; i++) this.byId[this.artifacts[i].id] = this.artifacts[i];
    this.tainted = this.opts.tainted || Object.create(null);
    this.collapsed = false;
    // a forget's reconciliation items (before graph only): by key, and by the orphaned call they name
    this.items = Object.create(null); this.itemsOf = Object.create(null);
    var self = this;
    (this.opts.reconciliation || []).forEach(function (it) {
      self.items[it.id] = it;
      (it.parents || []).forEach(function (p) { (self.itemsOf[p] = self.itemsOf[p] || []).push(it); });
    });
  }
  Graph.prototype.isLeft = function (id) {
    return (this.itemsOf[id] || []).some(function (it) { return it.type === 'left'; });
  };
  /* The compensations as nodes in a lane of their own (positions: layout.reconciliation),
   * each with an edge from the orphaned call it undoes. */
  Graph.prototype.reconciliationEls = function (minX) {
    var self = this, rl = this.layout.reconciliation || {}, pos = rl.nodes || {}, els = [], drawn = 0;
    Object.keys(this.items).forEach(function (key) {
      var it = self.items[key];
      if (it.type !== 'compensation') return;
      var p = pos[key] || { x: minX, y: rl.y || 0 }, id = 'rec\u241f' + key;
      drawn++;
      els.push({ group: 'nodes', classes: 'reconciliation compensation ' + (ITEM_STATES[it.state] || 'pending'),
        position: { x: p.x, y: p.y },
        data: { id: id, ref: key, colour: COMPENSATION, label: '\u21ba ' + str(it.runs) + ' (' + str(it.state) + ')' } });
      (it.parents || []).forEach(function (parent) {
        if (self.byId[parent]) els.push({ group: 'edges', classes: 'compensates', data: { source: parent, target: id } });
      });
    });
    if (drawn) els.push({ group: 'nodes', classes: 'lane', position: { x: minX - 40, y: rl.y || 0 },
      data: { id: 'lane\u241freconciliation', colour: '#fff', label: 'reconciliation' }, selectable: false, grabbable: false });
    return els;
  };
  Graph.prototype.checkpointEls = function () {
    var pos = this.layout.checkpoints || {}, u = this.unit;
    return (this.g.checkpoints || []).map(function (c) {
      return { group: 'nodes', classes: 'checkpoint', position: { x: (pos[c.id] || {}).x || 0, y: ((pos[c.id] || {}).y || -90) * u },
        data: { id: 'cp\u241f' + c.id, ref: c.id, colour: '#333', size: 14 * u, fs: 10 * u, label: str(c.kind) + ' @' + str(c.step) } };
    });
  };
  Graph.prototype.expandedEls = function () {
    this.unit = 1;
    var self = this, pos = this.layout.nodes || {}, els = [], minX = Infinity;
    this.artifacts.forEach(function (a) {
      var p = pos[a.id] || { x: 0, y: 0 }, cls = ['artifact'];
      if (p.x < minX) minX = p.x;
      if (self.tainted[a.id]) cls.push(self.opts.closureClass || 'tainted');
      if (self.opts.entry != null && a.id === self.opts.entry) cls.push('entry');
      if ((a.findings && a.findings.length) || (a.decisions && a.decisions.length)) cls.push('flagged');
      if (self.opts.isNew && self.opts.isNew(a.id)) cls.push('new');
      if (self.opts.orphaned && self.opts.orphaned[a.id]) cls.push('orphaned');
      if (self.isLeft(a.id)) cls.push('left');
      var flag = (cls.indexOf('flagged') >= 0 ? '\u2691 ' : '') + (cls.indexOf('left') >= 0 ? '\u2298 ' : '');
      els.push({ group: 'nodes', classes: cls.join(' '), position: { x: p.x, y: p.y },
        data: { id: a.id, colour: self.opts.colour ? self.opts.colour(a) : colourOf(a.type), label: flag + a.id } });
    });
    this.artifacts.forEach(function (a) {
      var seen = Object.create(null);
      (a.parents || []).forEach(function (p) {
        if (seen[p] || !self.byId[p]) return;
        seen[p] = true;
        els.push({ group: 'edges', classes: 'parent' + (self.tainted[p] && self.tainted[a.id] && !self.opts.closureClass ? ' tainted' : ''),
          data: { source: p, target: a.id } });
      });
    });
    if (!isFinite(minX)) minX = 0;
    (this.layout.lanes || []).forEach(function (l) {
      els.push({ group: 'nodes', classes: 'lane', position: { x: minX - 40, y: l.y },
        data: { id: 'lane\u241f' + l.type, colour: '#fff', label: l.type }, selectable: false, grabbable: false });
    });
    return els.concat(this.reconciliationEls(minX), this.checkpointEls());
  };
  Graph.prototype.turnOf = function (a) {
    return typeof a.turn === 'number' ? 'turn-' + a.turn : 'turn-none';
  };
  Graph.prototype.collapsedEls = function () {
    var self = this, taintedTurn = Object.create(null), els = [], max = 1;
    this.artifacts.forEach(function (a) { if (self.tainted[a.id]) taintedTurn[self.turnOf(a)] = true; });
    var turns = this.layout.turns || [], lo = Infinity, hi = -Infinity;
    turns.forEach(function (t) { if (t.count > max) max = t.count; lo = Math.min(lo, t.x); hi = Math.max(hi, t.x); });
    // turns sit at their first step: far apart in long sessions, so sizes scale with the spacing
    var u = this.unit = turns.length > 1 ? Math.max(1, (hi - lo) / (turns.length - 1) / 150) : 1;
    turns.forEach(function (t) {
      var hot = t.tainted || taintedTurn[t.id];
      els.push({ group: 'nodes', classes: 'turn' + (hot ? ' tainted' : ''), position: { x: t.x, y: t.y },
        data: { id: t.id, colour: hot ? '#f8d0d0' : t.types.length === 1 ? colourOf(t.types[0]) : '#c9d3e3', bw: u,
          size: u * (24 + 46 * Math.sqrt(t.count / max)), fs: 10 * u, label: (t.turn == null ? '?' : t.turn) + ' (' + t.count + ')' } });
    });
    var dx = this.layout.dx || 100;
    (this.layout.turn_edges || []).forEach(function (e) {
      els.push({ group: 'edges', classes: 'turn-edge', data: { source: e.source, target: e.target, count: e.count,
        w: u * Math.min(1 + Math.log(e.count) * 1.5, 8), fs: 8 * u, cpd: -Math.min(30 * u + e.span * dx * 0.08, 400 * u) } });
    });
    return els.concat(this.checkpointEls());
  };
  Graph.prototype.mount = function (container, collapsed) {
    var n = this.artifacts.length, big = n > BIG;
    this.cy = cytoscape({ container: container, style: STYLE, boxSelectionEnabled: false,
      minZoom: 0.01, maxZoom: 4, textureOnViewport: big, hideEdgesOnViewport: big,
      pixelRatio: big ? 1 : 'auto', layout: { name: 'preset', fit: false } });
    this.setMode(collapsed);
    var self = this;
    this.cy.on('tap', 'node.artifact', function (e) { show(self, e.target.id()); });
    this.cy.on('tap', 'node.checkpoint', function (e) { showCheckpoint(self, e.target.data('ref')); });
    this.cy.on('tap', 'node.reconciliation', function (e) { showItem(self, e.target.data('ref')); });
    this.cy.on('tap', 'node.turn', function (e) { self.expandTurn(e.target.id()); });
    return this;
  };
  Graph.prototype.setMode = function (collapsed) {
    var cy = this.cy;
    cy.startBatch();
    cy.elements().remove();
    cy.add(collapsed ? this.collapsedEls() : this.expandedEls());
    cy.endBatch();
    this.collapsed = !!collapsed;
    this.home();
    if (this.onMode) this.onMode();
  };
  /* Fit everything when that stays legible; otherwise (long sessions) show
   * a legible window around the target entry, or the start of the session. */
  Graph.prototype.home = function () {
    var cy = this.cy, z = 0.6 / this.unit;
    cy.fit(undefined, 30);
    this.partial = cy.zoom() * this.unit < 0.3;
    if (cy.zoom() * this.unit > 1.5) { cy.zoom(1.5 / this.unit); cy.center(); }
    if (!this.partial) return;
    var bb = cy.elements().boundingBox(), e = this.byId[this.opts.entry];
    var anchor = e ? cy.getElementById(this.collapsed ? this.turnOf(e) : e.id) : cy.collection();
    var x = anchor.nonempty() ? anchor.position('x') : bb.x1 + (cy.width() / 2 - 30) / z;
    cy.zoom(z);
    cy.pan({ x: cy.width() / 2 - x * z, y: cy.height() / 2 - (bb.y1 + bb.y2) / 2 * z });
  };
  Graph.prototype.expandTurn = function (turnId) {
    var self = this;
    this.setMode(false);
    var ids = this.artifacts.filter(function (a) { return self.turnOf(a) === turnId; });
    var nodes = this.cy.collection(ids.map(function (a) { return self.cy.getElementById(a.id); }));
    if (nodes.length) this.cy.fit(nodes, 60);
    panel('Turn ' + turnId.replace('turn-', ''), [row('artifacts', String(ids.length)),
      row('types', Object.keys(setOf(ids.map(function (a) { return a.type; }))).join(', '))]);
  };
  Graph.prototype.focus = function (id) {
    if (!this.byId[id]) return false;
    if (this.collapsed) this.setMode(false);
    var node = this.cy.getElementById(id);
    this.cy.center(node);
    show(this, id);
    return true;
  };

  /* The side panel: built with textContent only. */
  function row(label, value) { return [label, value]; }
  function panel(title, rows, extra) {
    var dl = el('dl');
    rows.forEach(function (r) {
      dl.appendChild(el('dt', { text: r[0] }));
      var dd = el('dd');
      if (r[1] instanceof Node) dd.appendChild(r[1]); else dd.textContent = r[1] == null || r[1] === '' ? '—' : r[1];
      dl.appendChild(dd);
    });
    var p = $('panel');
    p.textContent = '';
    p.appendChild(el('h3', { text: title }));
    p.appendChild(dl);
    (extra || []).forEach(function (x) { p.appendChild(x); });
  }
  function list(items, fmt) {
    if (!items || !items.length) return '—';
    return el('ul', {}, items.map(function (x) { return el('li', { text: fmt(x) }); }));
  }
  function show(graph, id) {
    var a = graph.byId[id];
    if (!a) return;
    graph.cy.$(':selected').unselect();
    graph.cy.getElementById(id).select();
    var parents = el('span');
    (a.parents || []).forEach(function (p, i) {
      if (i) parents.appendChild(document.createTextNode(', '));
      parents.appendChild(graph.byId[p] ? el('button', { 'class': 'linkish', type: 'button', text: p,
        onclick: function () { graph.focus(p); } }) : el('span', { text: p + ' (absent)' }));
    });
    var rows = [row('graph', graph.name), row('id', a.id), row('type', a.type), row('parents', (a.parents || []).length ? parents : '—'),
      row('sources', (a.source_ids || []).join(', ')), row('token span', a.token_span ? '[' + a.token_span.join(', ') + ')' : ''),
      row('turn', str(a.turn)), row('step', str(a.step)), row('committed', str(a.committed)),
      row('labels', (a.labels || []).join(', ')), row('keyed hash', str(a.content_hash)),
      row('in closure', graph.tainted[a.id] ? 'yes' : 'no')];
    var orphan = graph.opts.orphaned && graph.opts.orphaned[a.id];
    if (orphan) rows.push(row('after a fork', orphanText(orphan)));
    if (graph.itemsOf[a.id]) rows.push(row('reconciliation', list(graph.itemsOf[a.id], itemText)));
    if (graph.opts.outcomeOf) rows.push(row('outcome', graph.opts.outcomeOf(a.id).join(', ') || 'unchanged'));
    rows.push(row('findings', list(a.findings, function (f) {
      return str(f.detector) + ' ' + str(f.score) + ': ' + str(f.reason) + (f.start != null ? ' [' + f.start + ', ' + str(f.end) + ')' : '');
    })));
    rows.push(row('decisions', list(a.decisions, function (d) {
      return str(d.decision) + (d.mode ? ' (' + d.mode + ')' : '') + (d.tool ? ' ' + d.tool : '') + ' at ' + str(d.sink) + ' · ' + str(d.label);
    })));
    if (a.attrs && Object.keys(a.attrs).length) rows.push(row('attrs', clip(JSON.stringify(a.attrs), 2000)));
    var text = a.text != null ? el('pre', { 'class': 'payload-text', text: String(a.text) })
      : el('p', { 'class': 'muted no-text', text: contentIncluded && graph.name === 'session'
        ? 'no text recorded for this artifact' : 'payload text not included (use --content)' });
    panel(str(a.type) + ' ' + a.id, rows, [el('h3', { text: 'text' }), text]);
  }
  function showCheckpoint(graph, id) {
    var c = (graph.g.checkpoints || []).filter(function (x) { return x.id === id; })[0];
    if (!c) return;
    panel('checkpoint ' + c.id, Object.keys(c).map(function (k) {
      return row(k, val(c[k]));
    }));
  }

  /* A reconciliation item (one row of the forget's plan for the world): ids, names and state only. */
  function itemText(it) {
    return str(it.action) + ' · ' + str(it.tool) + ' \u2192 ' +
      (it.runs != null ? str(it.runs) : 'nobody (undo it by hand)') + ' · ' + str(it.state) +
      ((it.parents || []).length ? ' · call ' + it.parents.join(', ') : '');
  }
  function showItem(graph, key) {
    var it = graph.items[key];
    if (!it) return;
    graph.cy.$(':selected').unselect();
    graph.cy.getElementById('rec\u241f' + key).select();
    var undoes = el('span');
    (it.parents || []).forEach(function (p, i) {
      if (i) undoes.appendChild(document.createTextNode(', '));
      undoes.appendChild(graph.byId[p] ? el('button', { 'class': 'linkish', type: 'button', text: p,
        onclick: function () { graph.focus(p); } }) : el('span', { text: p + ' (absent)' }));
    });
    panel(str(it.type) + ' ' + key, [row('graph', graph.name), row('item', key), row('type', str(it.type)),
      row('action', str(it.action)), row('tool', str(it.tool)), row('runs', str(it.runs)), row('state', str(it.state)),
      row('orphaned call', (it.parents || []).length ? undoes : '')]);
  }
  function reconciliationSummary(items) {
    var box = $('reconciliation-summary');
    box.textContent = '';
    if (!items.length) return;
    box.appendChild(el('span', { 'class': 'tag green', text: 'reconciliation of the world' }));
    box.appendChild(document.createTextNode(' ' + items.length + ' item' + (items.length > 1 ? 's' : '') +
      ' to bring the world in line with the counterfactual (action · tool \u2192 what runs · state)'));
    box.appendChild(el('ul', {}, items.map(function (it) {
      return el('li', { 'class': 'reconciliation-row', text: itemText(it) });
    })));
  }

  /* An orphaned store item (memory whose evidence a fork abandoned): what and what became of it. */
  function orphanText(o) {
    return str(o.action) + ': ' + str(o.namespace) + '/' + str(o.key) + ', written in turn ' + str(o.abandoned_turn) +
      (o.writer ? ' of session ' + o.writer : '') + ', found in turn ' + str(o.detected_turn) +
      (o.restored ? ' (restored: ' + o.restored + ')' : '') +
      (o.read_by && o.read_by.length ? ' · read by ' + o.read_by.join(', ') : '');
  }
  function orphanedSummary(items) {
    var box = $('orphaned-summary');
    box.textContent = '';
    if (!items.length) return;
    box.appendChild(el('span', { 'class': 'tag orange', text: 'orphaned memory' }));
    box.appendChild(document.createTextNode(' ' + items.length + ' store item' + (items.length > 1 ? 's' : '') +
      ' whose evidence a fork abandoned'));
    box.appendChild(el('ul', {}, items.map(function (o) { return el('li', { text: str(o.write_id) + ' · ' + orphanText(o) }); })));
  }

  function legend(box, entries) {
    box.textContent = '';
    entries.forEach(function (e) {
      var sw = el('i');
      sw.style.background = e[1];
      if (e[2]) sw.style.borderColor = e[2];
      box.appendChild(el('span', {}, [sw, e[0]]));
    });
  }
  function hashOpts() {
    var out = {};
    (location.hash || '').replace(/^#/, '').split('&').forEach(function (kv) {
      var i = kv.indexOf('=');
      if (i > 0) out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    return out;
  }

  function forgetSection(f, data) {
    $('forget').hidden = false;
    var o = f.outcome || {}, outcomeOf = Object.create(null);
    OUTCOMES.slice().reverse().forEach(function (pair) {
      (o[pair[0]] || []).forEach(function (id) { (outcomeOf[id] = outcomeOf[id] || []).unshift(pair[0]); });
    });
    var colours = Object.create(null);
    OUTCOMES.forEach(function (p) { colours[p[0]] = p[1]; });
    var tbl = el('table', { 'class': 'counts' });
    function tr(k, v, ids) {
      tbl.appendChild(el('tr', {}, [el('th', { text: k }), ids === undefined ? el('td', { colspan: '2', text: v })
        : el('td', { text: v }), ids === undefined ? null : el('td', { 'class': 'ids', text: ids })]));
    }
    tr('event', str(f.event_id)); tr('strategy', str(f.strategy)); tr('committed', str(f.committed));
    tr('τ', str(f.tau)); tr('entry', str(f.entry)); tr('checkpoint', str(f.checkpoint));
    ['entry_type', 'checkpoint_kind', 'raised_by', 'created_at', 'erased_clean', 'counts', 'receipt'].forEach(function (k) {
      if (f[k] != null) tr(k.replace('_', ' '), val(f[k]));
    });
    tr('closure', String((f.closure || []).length), short(f.closure, 100));
    OUTCOMES.forEach(function (p) { tr(p[0], String((o[p[0]] || []).length), short(o[p[0]], 100)); });
    ['deferred', 'orphaned'].forEach(function (k) {
      tr(k, String((o[k] || []).length), short((o[k] || []).map(function (t) { return str(t.tool) + ' (' + str(t.call_id) + ')'; }), 100));
    });
    $('forget-summary').appendChild(tbl);
    var items = (o.reconciliation || []).filter(function (it) { return it && it.id != null; });
    reconciliationSummary(items);
    var before = new Graph('before', f.before, { tainted: setOf(f.closure), closureClass: 'in-closure', entry: f.entry,
      reconciliation: items,
      colour: function (a) { var k = outcomeOf[a.id]; return k ? colours[k[0]] : UNCHANGED; },
      outcomeOf: function (id) { return outcomeOf[id] || []; } }).mount($('cy-before'), false);
    var after = new Graph('after', f.after, { isNew: function (id) { return !before.byId[id]; } }).mount($('cy-after'), false);
    legend($('outcome-legend'), OUTCOMES.map(function (p) { return [p[0], p[1]]; })
      .concat([['in closure (before)', '#fff', RED], ['new in after (dashed)', '#fff', '#222']])
      .concat(items.some(function (it) { return it.type === 'compensation'; })
        ? [['\u21ba compensation (its compensator, state)', COMPENSATION]] : [])
      .concat(items.some(function (it) { return it.type === 'left'; })
        ? [['\u2298 orphaned call nobody can undo', '#fff', LEFT]] : []));
    return { before: before, after: after };
  }

  function main() {
    var data = JSON.parse($('unsee-data').textContent);
    var opts = hashOpts(), t = data.target, graph = data.graph || {};
    contentIncluded = !!data.content_included;
    $('session-id').textContent = str(data.session_id);
    var arts = graph.artifacts || [];
    $('meta').textContent = 'generated ' + str(data.generated_at) + ' · ' + arts.length + ' artifacts · ' +
      (graph.checkpoints || []).length + ' checkpoints · ' +
      (data.content_included ? 'payload texts included' : 'metadata only (no payload texts)');
    var tainted = setOf(t && t.closure);
    if (t && t.entry != null) tainted[t.entry] = true;
    var orphans = data.orphaned_memory || [], orphaned = Object.create(null);
    orphans.forEach(function (o) { if (!o.writer) orphaned[o.write_id] = o; });
    var m = new Graph('session', graph, { tainted: tainted, entry: t && t.entry, orphaned: orphaned });
    orphanedSummary(orphans);
    if (t) {
      var missing = (t.closure || []).filter(function (id) { return !m.byId[id]; }).length;
      $('target-summary').appendChild(el('span', {}, [el('span', { 'class': 'tag red', text: 'target' }),
        ' entry ' + str(t.entry) + ' · τ=' + str(t.tau) + ' · closure of ' + (t.closure || []).length + ' artifacts' +
        (t.source != null ? ' · source ' + t.source : '') + (missing ? ' · ' + missing + ' not in this graph' : '')]));
    }
    var startCollapsed = opts.mode ? opts.mode === 'collapsed' : !!data.collapse;
    var fg = null;
    m.onMode = function () {
      $('toggle-collapse').textContent = m.collapsed ? 'Expand all' : 'Collapse by turn';
      $('mode-note').textContent = (m.collapsed ? 'one node per turn; click a turn to expand' : 'laid out by step, one lane per type') +
        (m.partial ? ' · showing part of a long session (scroll to zoom, drag to pan, Fit for all)' : '');
      updateStats(m, fg);
    };
    m.mount($('cy'), startCollapsed);
    $('toggle-collapse').onclick = function () { m.setMode(!m.collapsed); };
    $('fit').onclick = function () { m.cy.fit(undefined, 30); };
    var types = Object.keys(setOf(arts.map(function (a) { return a.type; })));
    legend($('legend'), types.map(function (k) { return [k, colourOf(k)]; }).concat([
      ['in closure', '#fff', RED], ['target entry', '#fff', ENTRY], ['\u2691 findings/decisions', '#fff', FLAG],
      ['checkpoint', '#333']]).concat(orphans.length ? [['orphaned memory (after a fork)', '#fff', ORPHAN]] : []));
    if (data.forget) fg = forgetSection(data.forget, data);
    if (opts.turn) m.expandTurn(opts.turn);
    if (opts.node) m.focus(opts.node);
    updateStats(m, fg);
  }

  function updateStats(m, fg) {
    var cy = m.cy, s = {
      nodes: cy.nodes(m.collapsed ? '.turn' : '.artifact').length,
      edges: cy.edges(m.collapsed ? '.turn-edge' : '.parent').length,
      highlighted: cy.nodes('.tainted').length,
      orphaned: cy.nodes('.orphaned').length,
      checkpoints: cy.nodes('.checkpoint').length,
      collapsed: m.collapsed ? 1 : 0,
      'before-nodes': fg ? fg.before.cy.nodes('.artifact').length : 0,
      'before-edges': fg ? fg.before.cy.edges('.parent').length : 0,
      'before-closure': fg ? fg.before.cy.nodes('.in-closure').length : 0,
      'after-nodes': fg ? fg.after.cy.nodes('.artifact').length : 0,
      'after-edges': fg ? fg.after.cy.edges('.parent').length : 0,
      compensations: fg ? fg.before.cy.nodes('.compensation').length : 0,
      'compensation-edges': fg ? fg.before.cy.edges('.compensates').length : 0,
      left: fg ? fg.before.cy.nodes('.left').length : 0,
      'reconciliation-rows': document.querySelectorAll('#reconciliation-summary li').length,
      selected: cy.$('node:selected').map(function (n) { return n.id(); }).join(' ')
    };
    Object.keys(s).forEach(function (k) { stats.setAttribute('data-' + k, String(s[k])); });
  }

  try { main(); } catch (e) { fail(e); } finally { stats.setAttribute('data-ready', '1'); }
})();
