// memo: a component that re-renders only when one of its props changes (by identity), so a
// live event re-renders the one item it changed.
import { h } from "preact";

export function memo(component) {
  function Memo(props) {
    this.shouldComponentUpdate = (next) => {
      for (const k in next) if (next[k] !== this.props[k]) return true;
      for (const k in this.props) if (!(k in next)) return true;
      return false;
    };
    return h(component, props);
  }
  Memo.displayName = "Memo(" + (component.displayName || component.name) + ")";
  return Memo;
}
