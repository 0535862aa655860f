// The search of a site opened from disk (file://). Material runs its search in a Web Worker, and browsers refuse
// a Worker whose script is a file:// URL; mkdocs-material's offline plugin fetches a shim for that from unpkg.com,
// which an offline reader cannot reach. This is a local stand-in: on file:// pages, `Worker` runs the worker's
// script in a hidden iframe of the same page (same origin), and messages pass through that iframe's window.
// It covers what Material's search worker uses: postMessage both ways, "message" listeners and importScripts
// (returning a promise, which the worker awaits). Served pages (http) keep the browser's own Worker.
(function () {
  "use strict";
  if (location.protocol !== "file:") {
    return;
  }

  function loadScript(doc, src) {
    return new Promise(function (resolve, reject) {
      var script = doc.createElement("script");
      script.src = src;
      script.onload = function () { resolve(); };
      script.onerror = function () { reject(new Error("cannot load " + src)); };
      doc.head.appendChild(script);
    });
  }

  function FileWorker(url) {
    var target = document.createElement("div");  // an EventTarget with the DOM's listener semantics
    var frame = document.createElement("iframe");
    var base = new URL(url, location.href);
    frame.style.display = "none";
    (document.body || document.documentElement).appendChild(frame);
    var win = frame.contentWindow;
    var doc = frame.contentDocument;
    var self = this;

    // the worker's postMessage: to this object's listeners, asynchronously as from a real worker
    win.postMessage = function (data) {
      setTimeout(function () {
        var event = new MessageEvent("message", { data: data });
        if (typeof self.onmessage === "function") {
          self.onmessage(event);
        }
        target.dispatchEvent(event);
      }, 0);
    };
    win.importScripts = function () {
      var urls = Array.prototype.slice.call(arguments);
      return urls.reduce(function (done, src) {
        return done.then(function () { return loadScript(doc, new URL(src, base).href); });
      }, Promise.resolve());
    };
    this._ready = loadScript(doc, base.href);
    this._frame = frame;
    this._win = win;
    this._target = target;
    this.onmessage = null;
  }

  FileWorker.prototype.postMessage = function (data) {
    var win = this._win;
    this._ready.then(function () {
      setTimeout(function () { win.dispatchEvent(new win.MessageEvent("message", { data: data })); }, 0);
    });
  };
  FileWorker.prototype.addEventListener = function (type, listener, options) {
    this._target.addEventListener(type, listener, options);
  };
  FileWorker.prototype.removeEventListener = function (type, listener, options) {
    this._target.removeEventListener(type, listener, options);
  };
  FileWorker.prototype.terminate = function () {
    this._frame.remove();
  };

  window.Worker = FileWorker;
})();
