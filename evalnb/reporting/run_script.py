"""The style and the script of the run report: plain CSS and vanilla JavaScript, no library.

The script reads the embedded JSON once, keeps the items that pass the filter, the task choice
and the search, and draws one page of them (``PAGE_SIZE`` items) with DOM calls and
``textContent``, so sample text is never parsed as HTML.
"""

from __future__ import annotations

__all__ = ["CSS", "PAGE_SIZE", "SCRIPT"]

PAGE_SIZE = 20

CSS = """
body{font-family:DejaVu Sans,Arial,sans-serif;font-size:14px;color:#111;background:#fff;margin:0}
main{max-width:1200px;margin:0 auto;padding:16px}
h1{font-size:22px;margin:4px 0}h2{font-size:18px;border-bottom:1px solid #d1d5db;padding-bottom:4px;margin-top:28px}
h3{font-size:15px}.muted{color:#6b7280}
table.facts th{text-align:left;padding:2px 12px 2px 0;color:#4b5563;font-weight:normal}
table.grid{border-collapse:collapse;margin:8px 0;font-size:13px}
table.grid th,table.grid td{border:1px solid #e5e7eb;padding:3px 6px;text-align:left;vertical-align:top}
table.grid td.num{text-align:right;font-variant-numeric:tabular-nums}
.figure svg{max-width:100%;height:auto}
.controls{display:flex;flex-wrap:wrap;gap:8px;align-items:center;position:sticky;top:0;background:#fff;
padding:6px 0;border-bottom:1px solid #e5e7eb;z-index:1}
.filters button{border:1px solid #9ca3af;background:#f9fafb;border-radius:4px;padding:3px 8px;cursor:pointer}
.filters button.on{background:#1d4ed8;color:#fff;border-color:#1d4ed8}.filters button:disabled{opacity:.45}
#search{min-width:260px;padding:3px 6px}
.item{border:1px solid #d1d5db;border-radius:6px;margin:10px 0;padding:8px}
.ihead{font-weight:600;margin-bottom:4px}.flag{color:#b45309;font-weight:normal;margin-left:8px}
pre{white-space:pre-wrap;word-break:break-word;margin:0;font-family:DejaVu Sans Mono,Menlo,Consolas,monospace;
font-size:12px}
.prompt pre{max-height:220px;overflow:auto;background:#eff6ff;border:1px solid #bfdbfe;padding:4px}
.target pre{background:#f3f4f6;padding:4px}
table.side{border-collapse:collapse;width:100%;margin-top:6px;table-layout:fixed}
table.side th,table.side td{border:1px solid #e5e7eb;padding:4px;vertical-align:top;text-align:left}
table.side th.row{width:130px;color:#4b5563;font-weight:normal}
ins{background:#dcfce7;color:#14532d;text-decoration:underline}del{background:#fee2e2;color:#7f1d1d;text-decoration:line-through}
td.differs{background:#fef3c7}td.error{background:#fef2f2}mark{background:#fde047}
"""

SCRIPT = r"""
(function(){
var t0=performance.now(),D=JSON.parse(document.getElementById('evalnb-data').textContent);
window.evalnbParseMs=performance.now()-t0;
var FLAG={all:0,failures:1,different:2,changed:4}, SIZE=%(size)d;
var state={filter:'all',task:'',q:'',page:0}, shown=D.items;
var items=document.getElementById('items'), where=document.getElementById('where');
function el(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;
  if(text!==undefined&&text!==null)e.textContent=text;return e;}
function str(v){return v===null||v===undefined?'':(typeof v==='string'?v:JSON.stringify(v));}
function hay(it){if(it._hay===undefined){var p=[it[0],it[3],it[6]];
  it[5].forEach(function(s){if(s){p.push(s[1],str(s[2]),s[4],s[5]);}});it._hay=p.join('\n').toLowerCase();}
  return it._hay;}
function select(){var f=FLAG[state.filter],q=state.q.toLowerCase();
  shown=D.items.filter(function(it){return (!f||(it[4]&f))&&(!state.task||it[0]===state.task)&&(!q||hay(it).indexOf(q)>=0);});
  state.page=0;draw();}
function pre(text){var p=el('pre');p.textContent=text===null||text===undefined?'—':String(text);return p;}
function row(table,label,cells,differs){var tr=el('tr');tr.appendChild(el('th','row',label));
  cells.forEach(function(c,i){var td=el('td',differs&&differs[i]?'differs':'');if(c instanceof Node)td.appendChild(c);
  else td.textContent=c===null||c===undefined?'':String(c);tr.appendChild(td);});table.appendChild(tr);}
function details(summary,body){var d=el('details');d.appendChild(el('summary','',summary));d.appendChild(body);return d;}
function judge(calls){if(!calls||!calls.length)return null;var box=el('div');
  calls.forEach(function(c,i){box.appendChild(details('judge call '+(i+1)+' ('+(c.judge_model||'')+(c.cached?', from the store':'')+')',
    (function(){var b=el('div');b.appendChild(el('div','muted','request'));b.appendChild(pre(JSON.stringify(c.request,null,2)));
    b.appendChild(el('div','muted','reply'));b.appendChild(pre(c.reply));return b;})()));});return box;}
function item(it){var box=el('div','item');var flags=[];if(it[4]&1)flags.push('failure');if(it[4]&2)flags.push('different');
  if(it[4]&4)flags.push('changed vs baseline');
  var head=el('div','ihead','task '+it[0]+' · sample_index '+it[1]+(D.epochs?' · epoch '+it[2]:''));
  if(flags.length)head.appendChild(el('span','flag',flags.join(', ')));box.appendChild(head);
  var pr=el('div','prompt');if(it[7]){pr.appendChild(el('div','muted','prompts (inserted words [+…+], deleted [-…-], against the first)'));
    it[7].forEach(function(p){pr.appendChild(el('div','muted',p[0]));var q=el('pre');q.innerHTML=p[1];pr.appendChild(q);});}
  else{pr.appendChild(el('div','muted','prompt'));pr.appendChild(pre(it[3]));}box.appendChild(pr);
  var tg=el('div','target');tg.appendChild(el('div','muted','target'));tg.appendChild(pre(it[6]));box.appendChild(tg);
  var t=el('table','side'),h=el('tr');h.appendChild(el('th','row',''));D.columns.forEach(function(c){h.appendChild(el('th','',c));});
  t.appendChild(h);var S=it[5];function col(k,fmt){return S.map(function(s){return s?(fmt?fmt(s[k]):s[k]):'(no sample)';});}
  function diff(k){var first=null,seen=false;return S.map(function(s){var v=s?str(k===3?null:s[k]):null;if(!seen&&s){first=v;seen=true;}return s&&v!==first;});}
  row(t,'status',col(0));row(t,'output_text',S.map(function(s){return s?pre(s[1]):'(no sample)';}));
  row(t,'extracted_output',col(2,function(v){return v===null?'None (no match)':str(v);}),diff(2));
  D.metrics.forEach(function(m){if(!S.some(function(s){return s&&m in s[3];}))return;
    var vals=S.map(function(s){return s&&m in s[3]?s[3][m]:null;}),first=vals.find(function(v){return v!==null;});
    row(t,m,vals.map(function(v){return v===null?'':String(v);}),vals.map(function(v){return v!==null&&v!==first;}));});
  if(S.some(function(s){return s&&s[4];}))row(t,'error',S.map(function(s){return s&&s[4]?pre(s[4]):'';}));
  if(S.some(function(s){return s&&s[5];}))row(t,'grader log',S.map(function(s){return s&&s[5]?details('what the grader printed',pre(s[5])):'';}));
  if(S.some(function(s){return s&&s[6]&&s[6].length;}))row(t,'judge',S.map(function(s){return s?(judge(s[6])||''):'';}));
  box.appendChild(t);return box;}
function draw(){var pages=Math.max(1,Math.ceil(shown.length/SIZE));state.page=Math.min(state.page,pages-1);
  var start=state.page*SIZE,part=shown.slice(start,start+SIZE);items.textContent='';
  if(!part.length)items.appendChild(el('p','muted','no item matches'));
  var frag=document.createDocumentFragment();part.forEach(function(it){frag.appendChild(item(it));});items.appendChild(frag);
  where.textContent='page '+(state.page+1)+' of '+pages+' · items '+(part.length?start+1:0)+'-'+(start+part.length)+' of '+shown.length;
  document.getElementById('prev').disabled=state.page<=0;document.getElementById('next').disabled=state.page>=pages-1;
  Array.prototype.forEach.call(document.querySelectorAll('.filters button'),function(b){b.classList.toggle('on',b.dataset.filter===state.filter);});}
Array.prototype.forEach.call(document.querySelectorAll('.filters button'),function(b){
  b.addEventListener('click',function(){state.filter=b.dataset.filter;select();});});
document.getElementById('task').addEventListener('change',function(e){state.task=e.target.value;select();});
var timer=null;document.getElementById('search').addEventListener('input',function(e){clearTimeout(timer);
  timer=setTimeout(function(){state.q=e.target.value.trim();select();},120);});
document.getElementById('prev').addEventListener('click',function(){state.page-=1;draw();window.scrollTo(0,items.offsetTop-60);});
document.getElementById('next').addEventListener('click',function(){state.page+=1;draw();window.scrollTo(0,items.offsetTop-60);});
draw();
window.evalnbDrawnMs=performance.now();
})();
""" % {"size": PAGE_SIZE}
